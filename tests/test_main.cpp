// Catch2 main for the single-process unit tests; a run that passed removes its own temporary
// directories (tests/test_tmp.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/test_tmp.h"

int main(int argc, char** argv) {
  const int result = Catch::Session().run(argc, argv);
  if (result == 0) zl::test::remove_own_tmp_dirs();
  return result;
}
