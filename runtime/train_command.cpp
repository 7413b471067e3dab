// `zerolap train CONFIG`: trains the configured model on every rank of the job.
#include "runtime/commands.h"
#include "runtime/config.h"
#include "runtime/trainer.h"

namespace zl {

int run_train_command(const ConfigArgs& args, const World& world) {
  Config config;
  agree_on_user_errors(world, [&] { config = load_config(args.path, args.overrides); });
  std::unique_ptr<Trainer> trainer;
  agree_on_user_errors(world, [&] { trainer = std::make_unique<Trainer>(config, world); });
  trainer->run();
  trainer.reset();
  return 0;
}

}  // namespace zl
