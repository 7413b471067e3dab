// `zerolap bench` across precisions (bench.precision): one row per precision with its wire and
// state bytes (equal to the plan's), the limits measured in each precision's GEMM and fused
// optimizer step, and bf16 collectives where the rows use them.
#include <catch2/catch.hpp>

#include "kernels/gemm.h"
#include "models/model.h"
#include "runtime/bench/bench.h"
#include "runtime/bench/bench_report.h"
#include "tests/mpi/mpi_test_util.h"

using namespace zl;

TEST_CASE("bench.precision sweeps the precisions, each row with its limits and bytes", "[bench]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const Config config = test::small_config(
      {"bench.warmup=1", "bench.steps=2", "bench.modes=[\"ddp\", \"zero/none/reduce_broadcast\"]",
       "bench.precision=[\"fp32\", \"tf32\"]", "parallel.bucket_cap_mb=0.002",
       "parallel.first_bucket_cap_mb=0.001"});
  BenchOptions options;
  options.progress = false;
  const BenchReport report = run_bench(config, world, options);
  // Precisions outer, modes inner; each precision has its own GEMM and optimizer limits.
  REQUIRE(report.rows.size() == 4);
  REQUIRE(report.limits.precisions.size() == 2);
  CHECK(report.limits.precisions[0].precision == "fp32");
  CHECK(report.limits.precisions[1].precision == "tf32");
  CHECK(report.limits.precisions[1].gemm.size() == report.limits.precisions[0].gemm.size());
  CHECK(report.limits.precisions[1].optimizer_bytes_per_element == 28);
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const BenchRow& row = report.rows[i];
    INFO(row.precision << " " << row.mode);
    CHECK(row.precision == (i < 2 ? "fp32" : "tf32"));
    CHECK(row.reduce_dtype == "fp32");
    CHECK(row.state_bytes == row.planned_state_bytes);
    REQUIRE(row.speedup_vs_ddp.has_value());  // against ddp in the same precision
  }
  // tf32 stores fp32: the same state and the same bytes on the wire as fp32.
  CHECK(report.rows[3].state_bytes == report.rows[1].state_bytes);
  CHECK(report.rows[3].wire_bytes_per_step == report.rows[1].wire_bytes_per_step);
  const std::string table = format_bench_table(report);
  CHECK_THAT(table, Catch::Contains("tf32: GEMM floor") && Catch::Contains("state MiB"));
}

TEST_CASE("a bf16 bench row: its bytes on the wire, its state and its limits", "[bench]") {
  const World world = test::world_of(MPI_COMM_WORLD);
  const Config config = test::small_config(
      {"bench.warmup=1", "bench.steps=2", "bench.modes=[\"zero/none/reduce_broadcast\"]",
       "bench.precision=[\"fp32\", \"bf16\"]", "parallel.bucket_cap_mb=0.002",
       "parallel.first_bucket_cap_mb=0.001"});
  BenchOptions options;
  options.progress = false;
  const BenchReport report = run_bench(config, world, options);
  REQUIRE(report.rows.size() == 2);
  const BenchRow& fp32 = report.rows[0];
  const BenchRow& bf16 = report.rows[1];
  CHECK(bf16.precision == "bf16");
  CHECK(bf16.master_weights == "fp32");
  CHECK(bf16.state_bytes == bf16.planned_state_bytes);
  CHECK(bf16.optimizer_state_bytes == fp32.optimizer_state_bytes);
  // bf16 parameters (2 B) and fp32 masters (4 B per owned element) against fp32's 4 B parameters.
  CHECK(bf16.state_bytes != fp32.state_bytes);
  // fp32 gradients on the wire (reduce_dtype fp32), bf16 broadcasts: 2 bytes fewer per element
  // (the step's scalar all-reduces are the same in both).
  const std::int64_t numel = Model::parameter_layout(config.model).total_numel();
  if (world.size > 1) {
    CHECK(fp32.payload_bytes_per_step - bf16.payload_bytes_per_step == 2 * numel);
  }
  REQUIRE(report.limits.precisions.size() == 2);
  const PrecisionLimits& limits = report.limits.precisions[1];
  CHECK(limits.precision == "bf16");
  CHECK(limits.optimizer_bytes_per_element == 30);  // Adam: fp32 master r+w, bf16 param w, fp32 grad
  CHECK(limits.gemm_step_s > 0.0);
  // It names the bf16 path: oneDNN's bf16 matmul, or fp32 where the CPU has none.
  CHECK_THAT(limits.gemm_kernel, Catch::Contains(cpu_gemm_bf16_native() ? "bf16 native matmul"
                                                                        : "bf16 through fp32"));
  bool bf16_broadcast = false;
  for (const CollectiveLimit& c : report.limits.collectives) {
    bf16_broadcast = bf16_broadcast || (c.op == "broadcast" && c.dtype == DType::BF16);
  }
  CHECK(bf16_broadcast == (world.size > 1 || report.limits.collectives_local));
}
