// Start-up agreement: every rank must run the same config, data and build, or the job trains
// apart or crashes in a collective sized differently on each rank. agree_on_facts compares
// named facts across ranks before any such collective and names what differs and where.
#pragma once

#include <string>
#include <vector>

#include "runtime/comm/world.h"

namespace zl {

// One thing every rank must see alike: `value` is compared; `detail` only explains the value in
// a message (e.g. the file it came from, which may be a different path on each node).
struct RankFact {
  std::string name;  // "train.steps", "build version", "training images"
  std::string value;
  std::string detail;
};

// Collective. Every rank passes its facts (the same names in the same order when they agree).
// A hash of the names and values is compared first (16 bytes per rank); only when it differs
// are the facts themselves gathered, to name each differing fact with its value on each group of
// ranks. Then every rank throws the same UserError (exit 2). Waits at most timeout_s
// (RuntimeFailure naming the rank).
void agree_on_facts(const World& world, const std::vector<RankFact>& facts, double timeout_s);

// The message for facts[r] = rank r's facts; empty when they all agree (tests, agree_on_facts).
std::string describe_disagreement(const std::vector<std::vector<RankFact>>& facts);

}  // namespace zl
