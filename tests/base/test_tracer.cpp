// Tracer: spans recorded per thread, and the step limit of a long run's trace (output.trace_steps).
#include <catch2/catch.hpp>

#include <string>

#include "base/tracer.h"

namespace {

int spans_named(const nlohmann::json& events, const std::string& name) {
  int n = 0;
  for (const auto& e : events) n += e.value("ph", "") == "X" && e.value("name", "") == name;
  return n;
}

}  // namespace

TEST_CASE("a tracer stops recording spans that begin after its stop, not those begun before",
          "[tracer]") {
  zl::Tracer tracer(0, /*enabled=*/true);
  tracer.span("main", "before", 1.0, 2.0);
  tracer.stop_recording_at(10.0);
  tracer.span("comm.broadcast", "begun before, ended after", 9.0, 30.0);
  tracer.span("main", "after", 11.0, 12.0);
  const nlohmann::json events = tracer.take_events();
  CHECK(spans_named(events, "before") == 1);
  CHECK(spans_named(events, "begun before, ended after") == 1);
  CHECK(spans_named(events, "after") == 0);
  // Thread names travel with the events; taking them leaves the tracer empty.
  int thread_names = 0;
  for (const auto& e : events) thread_names += e.value("name", "") == "thread_name";
  CHECK(thread_names == 2);
  CHECK(spans_named(tracer.take_events(), "before") == 0);
}

TEST_CASE("a disabled tracer records nothing", "[tracer]") {
  zl::Tracer tracer(0, /*enabled=*/false);
  tracer.span("main", "x", 1.0, 2.0);
  CHECK(spans_named(tracer.take_events(), "x") == 0);
}
