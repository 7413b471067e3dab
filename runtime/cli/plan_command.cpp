// `zerolap plan CONFIG [--world N]`: prints the bucket plan (buckets, sizes, assigned ranks) and
// the per-rank totals, including optimizer-state bytes for the configured mode.
#include <fmt/format.h>

#include "models/model.h"
#include "runtime/train/bucket_plan.h"
#include "runtime/train/mode_plan.h"
#include "runtime/cli/commands.h"
#include "runtime/config/config.h"

namespace zl {

int run_plan_command(const ConfigArgs& args, int world_size, const World& world) {
  Config config;
  agree_on_user_errors(world, [&] { config = load_config(args.path, args.overrides); });
  if (!world.is_root()) return 0;
  const int ranks = world_size > 0 ? world_size : world.size;
  const Model model(config.model, DeviceKind::Cpu);
  const ModePlan mode = make_mode_plan(config.parallel, config.optimizer);
  const BucketPlan plan =
      build_bucket_plan(model.store(), config.parallel.bucket_cap_mb,
                        config.parallel.first_bucket_cap_mb, ranks, config.parallel.assignment);
  fmt::print("bucket plan of {} for {} rank{}: mode {}, bucket_cap_mb {}, first_bucket_cap_mb {}, "
             "assignment {}, optimizer {}\n\n",
             config.source_path, ranks, ranks == 1 ? "" : "s", to_string(mode.mode),
             config.parallel.bucket_cap_mb, config.parallel.first_bucket_cap_mb,
             to_string(config.parallel.assignment), to_string(config.optimizer.kind));
  fmt::print("{}", format_bucket_plan(plan, model.store(), mode));
  return 0;
}

}  // namespace zl
