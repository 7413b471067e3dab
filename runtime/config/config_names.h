// The spelling of config values, read (config.cpp) and written (config_toml.cpp) alike: one table
// per enum, so a name is never accepted one way and spelled another, and a float's text. Internal
// to runtime/config*.
#pragma once

#include <fmt/format.h>

#include <concepts>
#include <string>
#include <string_view>

#include "runtime/config/config.h"

namespace zl::config_detail {

template <class E>
struct EnumName {
  std::string_view name;
  E value;
};

inline constexpr EnumName<ModelKind> kModelKindNames[] = {{"mlp", ModelKind::Mlp},
                                                          {"residual_mlp", ModelKind::ResidualMlp}};
inline constexpr EnumName<Activation> kActivationNames[] = {{"relu", Activation::Relu},
                                                            {"gelu", Activation::Gelu},
                                                            {"tanh", Activation::Tanh},
                                                            {"identity", Activation::Identity}};
inline constexpr EnumName<DataKind> kDataKindNames[] = {{"fashion_mnist", DataKind::FashionMnist},
                                                        {"idx", DataKind::Idx},
                                                        {"spirals", DataKind::Spirals},
                                                        {"teacher", DataKind::Teacher}};
inline constexpr EnumName<TaskKind> kTaskKindNames[] = {
    {"regression", TaskKind::Regression}, {"classification", TaskKind::Classification}};
inline constexpr EnumName<OptimizerKind> kOptimizerKindNames[] = {
    {"adam", OptimizerKind::Adam}, {"adamw", OptimizerKind::AdamW}, {"sgd", OptimizerKind::Sgd}};
inline constexpr EnumName<LrSchedule> kLrScheduleNames[] = {{"constant", LrSchedule::Constant},
                                                            {"cosine", LrSchedule::Cosine}};
inline constexpr EnumName<ParallelMode> kParallelModeNames[] = {{"ddp", ParallelMode::Ddp},
                                                                {"zero", ParallelMode::Zero}};
inline constexpr EnumName<Overlap> kOverlapNames[] = {{"none", Overlap::None},
                                                      {"after_backward", Overlap::AfterBackward},
                                                      {"interleaved", Overlap::Interleaved}};
inline constexpr EnumName<CheckpointFormat> kCheckpointFormatNames[] = {
    {"single_file", CheckpointFormat::SingleFile}, {"sharded", CheckpointFormat::Sharded}};
inline constexpr EnumName<CollectiveKind> kCollectiveNames[] = {
    {"allreduce_broadcast", CollectiveKind::AllreduceBroadcast},
    {"reduce_broadcast", CollectiveKind::ReduceBroadcast},
    {"reduce_scatter_allgather", CollectiveKind::ReduceScatterAllgather}};
inline constexpr EnumName<AssignmentPolicy> kAssignmentNames[] = {
    {"round_robin", AssignmentPolicy::RoundRobin}, {"greedy", AssignmentPolicy::Greedy}};
inline constexpr EnumName<DeviceChoice> kDeviceNames[] = {
    {"auto", DeviceChoice::Auto}, {"cpu", DeviceChoice::Cpu}, {"cuda", DeviceChoice::Cuda}};
inline constexpr EnumName<CommPriority> kCommPriorityNames[] = {
    {"normal", CommPriority::Normal}, {"realtime", CommPriority::Realtime}};
inline constexpr EnumName<OnNonfinite> kOnNonfiniteNames[] = {{"stop", OnNonfinite::Stop},
                                                              {"skip_step", OnNonfinite::SkipStep}};
inline constexpr EnumName<ComputePrecision> kComputeNames[] = {
    {"fp32", ComputePrecision::Fp32}, {"tf32", ComputePrecision::Tf32},
    {"bf16", ComputePrecision::Bf16}};
inline constexpr EnumName<DType> kReduceDtypeNames[] = {{"fp32", DType::F32},
                                                        {"bf16", DType::BF16}};
inline constexpr EnumName<MasterWeights> kMasterWeightsNames[] = {
    {"fp32", MasterWeights::Fp32}, {"remainders", MasterWeights::Remainders}};

// The name of `value`; "?" only if a table misses an enumerator (a bug the round-trip test
// catches).
template <class E, std::size_t N>
constexpr const char* enum_name(const EnumName<E> (&names)[N], E value) {
  for (const auto& n : names) {
    if (n.value == value) return n.name.data();  // every name is a NUL-terminated literal
  }
  return "?";
}

// The allowed names for messages: "relu", "gelu", "tanh", "identity".
template <class E, std::size_t N>
std::string enum_choices(const EnumName<E> (&names)[N]) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "\"" : ", \"") + std::string(n.name) + '"';
  return out;
}

// The shortest text that reads back as the same value in its own precision (1e-3f -> "0.001",
// not "0.0010000000474974513"), and as a float: "25" -> "25.0"; inf and nan as they are.
template <std::floating_point T>
std::string float_text(T v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace zl::config_detail
