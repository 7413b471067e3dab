# MPI test registration: zerolap_add_mpi_test(NAME NP "[catch tags]" TIMEOUT_S). A test case that
# no filter here selects fails mpi.registered_tags (tests/mpi/registered_tags_test.sh).
# Every case runs under mpirun --oversubscribe; the TIMEOUT turns a hang into a fast failure.
foreach(np 1 2 3 4)
  zerolap_add_mpi_test(communicator ${np} "[comm]" 120)
  zerolap_add_mpi_test(equivalence ${np} "[equivalence]" 600)
  zerolap_add_mpi_test(determinism ${np} "[determinism]" 300)
  zerolap_add_mpi_test(zero ${np} "[zero]" 600)
  # Every mode x grad_accum 1 and 3 issues exactly its collective program (test_collective_program).
  zerolap_add_mpi_test(program ${np} "[program]" 300)
endforeach()
zerolap_add_mpi_test(communicator_timeout 2 "[comm-timeout]" 120)
zerolap_add_mpi_test(team 1 "[team]" 120)  # Note [Adaptive CPU team]: the bits of any team

# A rank killed with SIGKILL ends the whole job within 10 s; mpirun exits 137 (128 + 9).
zerolap_add_script_test(mpi.kill_rank.np2 120 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/kill_rank_test.sh $<TARGET_FILE:zerolap>
    ${PROJECT_SOURCE_DIR}/configs/spirals.toml ${CMAKE_CURRENT_BINARY_DIR}/tmp/kill_rank)

# OpenMP's own spinning wait on every rank under mpirun (no wait policy set), a user's own kept.
zerolap_add_script_test(mpi.openmp_wait.np2 120 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/openmp_wait_test.sh $<TARGET_FILE:zerolap>
    ${PROJECT_SOURCE_DIR}/configs/spirals.toml ${CMAKE_CURRENT_BINARY_DIR}/tmp/openmp_wait)

# Runs never overwrite each other's outputs (docs/reliability.md); the README's commands twice.
zerolap_add_script_test(mpi.run_outputs.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/run_outputs_test.sh $<TARGET_FILE:zerolap>
    ${PROJECT_SOURCE_DIR}/configs/spirals.toml ${CMAKE_CURRENT_BINARY_DIR}/tmp/run_outputs)

# scripts/supervise.sh: the exit codes it restarts and not; rank 2 of 4 killed twice, bitwise.
zerolap_add_script_test(mpi.supervise.np4 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/scripts/supervise_test.sh $<TARGET_FILE:zerolap>
    ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/tmp/supervise)

# SIGINT / SIGTERM on 2 ranks: the same stop step, a loadable checkpoint of it, exit 130 / 143.
zerolap_add_script_test(mpi.interrupt.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/interrupt_test.sh $<TARGET_FILE:zerolap>
    ${PROJECT_SOURCE_DIR}/configs/spirals.toml ${CMAKE_CURRENT_BINARY_DIR}/tmp/interrupt)

# Progress lines, the outputs line, epochs after a 2 -> 3 reshard, elapsed_s across a resume.
zerolap_add_script_test(mpi.bookkeeping.np3 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/bookkeeping_test.sh $<TARGET_FILE:zerolap>
    ${PROJECT_SOURCE_DIR}/configs/spirals.toml ${CMAKE_CURRENT_BINARY_DIR}/tmp/bookkeeping)

# zerolap bench, the simulated link and the trace (tests/mpi/test_bench.cpp).
zerolap_add_mpi_test(bench 2 "[bench]" 600)
zerolap_add_script_test(mpi.plot_bench.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/scripts/plot_bench_test.sh $<TARGET_FILE:zerolap>
    ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/tmp/plot_bench)
zerolap_add_mpi_test(link 1 "[link]" 300)
zerolap_add_mpi_test(bench_link 1 "[bench-link]" 300)
zerolap_add_mpi_test(link 2 "[link]" 300)
# The two-tier link (tests/mpi/test_link_tiers.cpp): each tier's bandwidth, its own link, the
# bench's limits per tier.
zerolap_add_mpi_test(link_tiers 2 "[link-tiers]" 300)
zerolap_add_mpi_test(trace 2 "[trace]" 300)
# The trace's clock alignment (tests/mpi/test_trace_clock.cpp): the offset estimate against the
# Tracers' true origins, and collectives that overlap across ranks in the merged trace.
foreach(np 2 3 4)
  zerolap_add_mpi_test(trace_clock ${np} "[trace-clock]" 300)
endforeach()

# Checkpoints (tests/mpi/test_checkpoint.cpp, tests/mpi/checkpoint_crash_test.sh).
foreach(np 1 2 3 4)
  zerolap_add_mpi_test(checkpoint_resume ${np} "[checkpoint-resume]" 300)
endforeach()
zerolap_add_mpi_test(checkpoint_reshard 2 "[checkpoint-reshard]" 300)
zerolap_add_mpi_test(checkpoint_reshard 3 "[checkpoint-reshard]" 300)
zerolap_add_mpi_test(checkpoint_reshard_2to3 3 "[checkpoint-reshard-2to3]" 300)
zerolap_add_mpi_test(checkpoint_reshard_4to1 4 "[checkpoint-reshard-4to1]" 300)
zerolap_add_mpi_test(checkpoint_run 2 "[checkpoint-run]" 300)
# data.global_batch_size: 40 steps on 4 ranks against 20 on 4 plus 20 resumed on 2.
zerolap_add_mpi_test(global_batch 4 "[global-batch]" 300)
# Across precisions (tests/mpi/test_checkpoint_precision.cpp): bf16 bitwise resume, fp32 <-> bf16.
zerolap_add_mpi_test(checkpoint_precision 1 "[checkpoint-precision]" 600)
zerolap_add_mpi_test(checkpoint_precision 2 "[checkpoint-precision]" 600)
zerolap_add_mpi_test(checkpoint_precision 3 "[checkpoint-precision]" 600)
zerolap_add_script_test(mpi.checkpoint_crash.np4 600 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/checkpoint_crash_test.sh $<TARGET_FILE:zerolap>
    ${CMAKE_CURRENT_BINARY_DIR}/tmp/checkpoint_crash)
# Sharded and async checkpoints (tests/mpi/test_sharded_checkpoint.cpp: 4-rank stage 3 against
# the single file at 3, 2, 1 ranks, async = sync bytes, consolidate; sharded_checkpoint_test.sh:
# the fault points, a full disk during an async write, corrupt and missing shards).
zerolap_add_mpi_test(sharded_checkpoint 4 "[sharded-checkpoint]" 300)
zerolap_add_script_test(mpi.sharded_checkpoint_cli.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/sharded_checkpoint_test.sh $<TARGET_FILE:zerolap>
    ${CMAKE_CURRENT_BINARY_DIR}/tmp/sharded_checkpoint_cli)

# ZeRO with element shards (tests/mpi/test_element_shards.cpp): every overlap and precision
# against ddp on 1-4 ranks, and a 3-rank checkpoint resumed into other modes, worlds, precisions.
foreach(np 1 2 3 4)
  zerolap_add_mpi_test(shards ${np} "[shards]" 600)
endforeach()
zerolap_add_mpi_test(shards_checkpoint 3 "[shards-checkpoint]" 300)

# The allocations equal the plan's memory figures (tests/mpi/test_rank_memory.cpp).
zerolap_add_mpi_test(rank_memory 1 "[rank-memory]" 300)
zerolap_add_mpi_test(rank_memory 2 "[rank-memory]" 300)

# Device selection (tests/mpi/test_device.cpp) runs everywhere; CUDA training against the CPU
# (tests/mpi/test_cuda_train.cpp) needs a GPU per rank, so one rank, and skips with a WARN without.
zerolap_add_mpi_test(device 1 "[device]" 120)
zerolap_add_mpi_test(device 2 "[device]" 120)
zerolap_add_mpi_test(device 3 "[device]" 120)  # oversubscribed: unbound ranks share one mask
zerolap_add_mpi_test(cuda_train 1 "[cuda-train]" 600)
# NCCL between GPUs, flat and hybrid sharding (test_cuda_train.cpp, [cuda-multi]): a GPU per rank,
# so it trains only on a machine with 2 (4) GPUs and skips with a WARN elsewhere.
zerolap_add_mpi_test(cuda_multi 2 "[cuda-multi]" 600)
zerolap_add_mpi_test(cuda_multi 4 "[cuda-multi]" 600)
# The compute-only bench twin against the real run (tests/mpi/test_compute_only.cpp).
zerolap_add_mpi_test(compute_only 1 "[compute-only]" 300)
set_tests_properties(mpi.cuda_train.np1 mpi.cuda_multi.np2 mpi.cuda_multi.np4
  PROPERTIES LABELS "mpi;cuda")
zerolap_add_mpi_test(reference_models 2 "[reference]" 600)
# bf16 training (tests/mpi/test_bf16_train.cpp; the bf16 reference runs in test_reference_models.cpp).
foreach(np 1 2 3 4)
  zerolap_add_mpi_test(bf16 ${np} "[bf16]" 300)
endforeach()
zerolap_add_mpi_test(reference_bf16 2 "[reference-bf16]" 600)

# Start-up agreement and deadlines (issue-15 reliability; README "Reliability").
zerolap_add_script_test(mpi.rank_agreement.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/rank_agreement_test.sh $<TARGET_FILE:zerolap>
    ${CMAKE_CURRENT_BINARY_DIR}/tmp/rank_agreement)
zerolap_add_script_test(mpi.deadline.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/deadline_test.sh $<TARGET_FILE:zerolap>
    ${CMAKE_CURRENT_BINARY_DIR}/tmp/deadline)

# Non-finite steps (issue-15 item 3; README "Reliability"): stop and skip_step in every mode
# (tests/mpi/test_nonfinite.cpp), and the command line's exit codes and checkpoints
# (tests/mpi/nonfinite_test.sh).
zerolap_add_mpi_test(nonfinite 2 "[nonfinite]" 300)
zerolap_add_script_test(mpi.nonfinite_cli.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/nonfinite_test.sh $<TARGET_FILE:zerolap>
    ${CMAKE_CURRENT_BINARY_DIR}/tmp/nonfinite)

# Writes that fail (a full disk): exit 1 naming the file, no temporary file, `latest` untouched
# (tests/mpi/full_disk_test.sh; docs/reliability.md).
zerolap_add_script_test(mpi.full_disk.np2 300 mpi
  ${CMAKE_CURRENT_SOURCE_DIR}/mpi/full_disk_test.sh $<TARGET_FILE:zerolap>
    ${CMAKE_CURRENT_BINARY_DIR}/tmp/full_disk)

# Hybrid sharding (tests/mpi/test_hybrid.cpp): 4 ranks as 2 groups of 2 against ddp in every
# overlap x stage x precision; a group of the whole world (bitwise flat) and of one rank on 3 and 4
# ranks; the checkpoint chain 4 (2 groups, stage 3) -> 3 flat -> 1 ddp -> 4.
zerolap_add_mpi_test(hybrid 4 "[hybrid]" 600)
zerolap_add_mpi_test(hybrid_edges 3 "[hybrid-edges]" 300)
zerolap_add_mpi_test(hybrid_edges 4 "[hybrid-edges]" 300)
zerolap_add_mpi_test(hybrid_checkpoint 4 "[hybrid-checkpoint]" 300)
# Hybrid bench rows on 4 ranks as 2 modelled nodes of 2 (tests/mpi/test_bench_hybrid.cpp): each
# tier's measured bytes are the plan's; a shard group that does not divide the world is refused.
zerolap_add_mpi_test(bench_hybrid 4 "[bench-hybrid]" 300)
