// check_derived_sizes (see config_sizes.h).
#include "runtime/config/config_sizes.h"

#include <fmt/format.h>

#include "base/checked_size.h"
#include "runtime/config/config_limits.h"

namespace zl::config_detail {

void check_derived_sizes(const Config& c, const ConfigSource& source) {
  const ModelSpec& m = c.model;
  if (m.widths.empty()) return;
  const auto check_bytes = [&](const std::string& key, std::int64_t value, CheckedSize bytes,
                               const char* what) {
    if (bytes.fits(kMaxDerivedBytes)) return;
    source.fail(key, fmt::format("= {} needs {} than 2^52 bytes (4 PiB) of {} with these "
                                 "model.widths, more than zerolap computes with; lower {}",
                                 value,
                                 bytes.ok() ? "more" : "far more (it overflows a 64-bit count)",
                                 what, key));
  };
  // An upper bound of the activation bytes one sample keeps (Note [Activation estimate] in
  // runtime/train/plan/memory_estimate.cpp counts at most 8 elements per width), checked.
  CheckedSize widths;
  for (const std::int64_t w : m.widths) widths += CheckedSize(w);
  const CheckedSize per_sample = widths * CheckedSize(8) * CheckedSize(4);
  check_bytes("data.batch_size", c.data.batch_size, per_sample * CheckedSize(c.data.batch_size),
              "activations per rank");
  check_bytes("data.eval_batch_size", c.data.eval_batch_size,
              per_sample * CheckedSize(c.data.eval_batch_size), "evaluation activations per rank");
  // The generated sets' own bounds (data/dataset.h), checked here to name the key.
  const auto at_most = [&](const std::string& key, std::int64_t value, CheckedSize size,
                           std::int64_t limit, const std::string& what) {
    if (size.fits(limit)) return;
    source.fail(key, fmt::format("= {} gives more than {} {}, the most a data.kind = \"{}\" set "
                                 "may have; lower {}",
                                 value, limit, what, to_string(c.data.kind), key));
  };
  const std::pair<const char*, std::int64_t> samples[] = {
      {"data.train_samples", c.data.train_samples}, {"data.test_samples", c.data.test_samples}};
  if (c.data.kind == DataKind::Spirals) {
    for (const auto& [key, n] : samples) at_most(key, n, n, kMaxSyntheticSamples, "samples");
  }
  if (c.data.kind == DataKind::Teacher) {
    const std::int64_t in = m.widths.front(), out = m.widths.back();
    if (in > kMaxTeacherInputs || out > kMaxTeacherOutputs) {
      source.fail("model.widths",
                  fmt::format("a data.kind = \"teacher\" set has at most {} inputs and {} outputs "
                              "(got {} and {})",
                              kMaxTeacherInputs, kMaxTeacherOutputs, in, out));
    }
    at_most("data.teacher_hidden", c.data.teacher_hidden, c.data.teacher_hidden, kMaxTeacherHidden,
            "hidden units");
    for (const auto& [key, n] : samples) {
      at_most(key, n, CheckedSize(n) * CheckedSize(in), kMaxSyntheticSamples,
              "input values (samples x model.widths[0])");
    }
  }
}

}  // namespace zl::config_detail
