# MPI test registration: zerolap_add_mpi_test(NAME NP "[catch tags]" TIMEOUT_S).
# Every case runs under mpirun --oversubscribe; the TIMEOUT turns a hang into a fast failure.
foreach(np 1 2 3 4)
  zerolap_add_mpi_test(communicator ${np} "[comm]" 120)
  zerolap_add_mpi_test(equivalence ${np} "[equivalence]" 600)
  zerolap_add_mpi_test(determinism ${np} "[determinism]" 300)
  zerolap_add_mpi_test(zero ${np} "[zero]" 600)
endforeach()
zerolap_add_mpi_test(communicator_timeout 2 "[comm-timeout]" 120)

# A rank killed with SIGKILL ends the whole job within 10 s with a non-zero exit.
add_test(NAME mpi.kill_rank.np2
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/mpi/kill_rank_test.sh $<TARGET_FILE:zerolap>
          ${PROJECT_SOURCE_DIR}/configs/spirals.toml ${CMAKE_CURRENT_BINARY_DIR}/tmp/kill_rank)
set_tests_properties(mpi.kill_rank.np2 PROPERTIES TIMEOUT 120 LABELS mpi PASS_REGULAR_EXPRESSION "PASS"
  FAIL_REGULAR_EXPRESSION "FAIL")

# zerolap bench, the simulated link and the trace (tests/mpi/test_bench.cpp).
zerolap_add_mpi_test(bench 2 "[bench]" 600)
zerolap_add_mpi_test(link 1 "[link]" 300)
zerolap_add_mpi_test(link 2 "[link]" 300)
zerolap_add_mpi_test(trace 2 "[trace]" 300)
