// The ownership rule of output.dir and checkpoint.dir (see run_outputs.h).
#include "runtime/checkpoint/run_outputs.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <sys/stat.h>
#include <toml++/toml.h>

#include "base/checked_write.h"
#include "base/errors.h"
#include "base/regular_file.h"
#include "runtime/checkpoint/files/checkpoint_files.h"
#include "runtime/checkpoint/files/checkpoint_pruning.h"
#include "runtime/checkpoint/files/run_identity.h"
#include "runtime/checkpoint/files/safetensors.h"
#include "runtime/checkpoint/files/shard_manifest.h"
#include "runtime/config/toml_key_parts.h"

namespace zl {
namespace fs = std::filesystem;
namespace {

// A saved config.toml is far below this; anything larger is not one.
constexpr std::int64_t kMaxSavedConfigBytes = std::int64_t{16} << 20;

// This launch: its subcommand, world size and effective config.
struct Launch {
  const char* command;
  int world_size;
  std::string config;  // to_toml
};

// Where the run starts: a fresh start, or the checkpoint it resumes from.
struct Start {
  bool resumed = false;
  std::int64_t step = 0;
  fs::path path;
  std::string run_id;  // the checkpoint's; "" when it has none (written before run ids)
  // Not resumed, though checkpoint.resume = true asked to: checkpoint.dir has no `latest` yet.
  std::string found_nothing_in;
};

Start find_start(const CheckpointConfig& c) {
  const auto resume = checkpoint_to_resume(c);  // a missing resume_path is reported here, exit 2
  if (!resume) {
    Start fresh;
    if (c.resume) fresh.found_nothing_in = c.dir;
    return fresh;
  }
  const std::string& path = *resume;
  // A sharded checkpoint (its directory or manifest): the manifest's step.
  if (const auto manifest = sharded_manifest_of(path)) {
    const Manifest m = read_manifest(*manifest);  // a damaged one is reported here, exit 2
    return Start{true, m.step, path, metadata_value(m.metadata, "run_id"), ""};
  }
  const SafetensorsReader file(path);  // a damaged one, or a FIFO, is reported here, exit 2
  const auto& meta = file.metadata();
  Start start{true, std::max<std::int64_t>(checkpoint_step_of(fs::path(path).filename()), 0), path,
              metadata_value(meta, "run_id"), ""};
  if (const auto step = meta.find("step"); step != meta.end()) {
    start.step = std::max<std::int64_t>(std::strtoll(step->second.c_str(), nullptr, 10), 0);
  }
  return start;
}

// A directory as this run finds it.
struct DirState {
  const char* key = "";            // "output.dir" or "checkpoint.dir"
  const char* overwrite_key = "";  // "output.overwrite" or "checkpoint.overwrite"
  std::string dir;
  std::optional<RunRecord> record;
  std::vector<std::string> files;  // a run's files in it: outputs, or checkpoints
  std::vector<DirCheckpoint> checkpoints;
  // The files of the other key's kind in it (checkpoints in an output.dir, outputs in a
  // checkpoint.dir): another run's make it that run's other directory.
  std::vector<std::string> other_files;
};

// A config.toml with no run.json beside it (an older zerolap's outputs): its differences from this
// run, or UserError naming it when it cannot be read as TOML.
std::string legacy_config_note(const fs::path& dir, const std::string& run_toml) {
  const fs::path saved = dir / "config.toml";
  std::error_code ec;
  if (!fs::exists(saved, ec)) return "";
  std::string text;
  std::optional<std::string> why;
  try {
    text = read_small_file(saved.string(), "saved config", kMaxSavedConfigBytes);
    const toml::table parsed = parse_guarded(text, saved.string());
  } catch (const toml::parse_error& e) {
    why = fmt::format("TOML syntax error at line {}: {}", e.source().begin.line,
                      escaped_excerpt(e.description(), 120));
  } catch (const UserError& e) {
    why = e.what();
  }
  if (why) {
    throw UserError(fmt::format("'{}' is unreadable ({}): it would say which run wrote the files "
                                "beside it. Restore it, or choose another directory",
                                saved.string(), *why));
  }
  // With its defaults filled in where it reads as a config (one written by hand, or with fewer
  // keys), so that a key it leaves out is not named as different; as text where it does not.
  std::string saved_toml = text;
  try {
    saved_toml = to_toml(parse_config(text, saved.string()));
  } catch (const UserError&) {
  }
  const auto keys = result_differences(saved_toml, run_toml);
  return keys.empty() ? "" : fmt::format("; its config.toml differs in {}", name_list(keys));
}

std::vector<std::string> output_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const char* name : kRunOutputFiles) {
    if (fs::exists(fs::symlink_status(fs::path(dir) / name, ec))) files.push_back(name);
  }
  return files;
}

DirState output_state(const std::string& dir) {
  DirState s{"output.dir", "output.overwrite", dir, read_run_record(dir), output_files_in(dir),
             {}, {}};
  for (const DirCheckpoint& c : list_checkpoints(dir)) s.other_files.push_back(c.name);
  return s;
}

DirState checkpoint_state(const std::string& dir) {
  DirState s{"checkpoint.dir", "checkpoint.overwrite", dir, read_run_record(dir), {},
             list_checkpoints(dir), output_files_in(dir)};
  for (const DirCheckpoint& c : s.checkpoints) s.files.push_back(c.name);
  return s;
}

// Whether two configured directories are one ("" is none: one only with another "").
bool same_dir(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return a == b;
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  const fs::path x = fs::weakly_canonical(fs::absolute(a, ec), ec);
  const fs::path y = fs::weakly_canonical(fs::absolute(b, ec), ec);
  return !ec && x == y;
}

// Exit 2 when `dir`, the directory of `key`, is or lies inside a checkpoint: a directory that holds
// a sharded checkpoint's manifest, or one named like a checkpoint in a directory with a `latest`
// or in this run's checkpoint.dir `ck_dir` ("": none). Its run writes and prunes such a directory
// whole (a sharded write removes the files its manifest does not name), with anything another
// run, or this run's outputs, put there.
void refuse_inside_checkpoint(const char* key, const std::string& dir, const std::string& ck_dir) {
  std::error_code ec;
  const auto resolved = [&](const std::string& d) {
    const fs::path p = fs::weakly_canonical(fs::absolute(d, ec), ec);
    return p.filename().empty() ? p.parent_path() : p;
  };
  const fs::path start = resolved(dir);
  const fs::path own_ck = ck_dir.empty() ? fs::path() : resolved(ck_dir);
  for (fs::path p = start; p.has_relative_path(); p = p.parent_path()) {
    const std::string name = p.filename().string();
    const bool named = checkpoint_step_of(name) >= 0 || sharded_step_of(name) >= 0;
    std::string what;
    if (fs::exists(p / kManifestName, ec)) {
      what = fmt::format("a sharded checkpoint (it holds {})", kManifestName);
    } else if (named && fs::exists(p.parent_path() / kLatestPointerName, ec)) {
      what = fmt::format("named like a checkpoint in '{}', which holds a `{}`",
                         p.parent_path().string(), kLatestPointerName);
    } else if (named && !own_ck.empty() && p.parent_path() == own_ck) {
      what = fmt::format("named like a checkpoint in this run's checkpoint.dir '{}'", ck_dir);
    } else {
      continue;
    }
    throw UserError(fmt::format(
        "{} '{}' {}{}: a checkpoint's directory holds that checkpoint alone (its run writes and "
        "prunes it whole, with anything else in it). Choose a directory outside it (--set {}=DIR)",
        key, dir, p == start ? "is " : fmt::format("lies inside '{}', ", p.string()), what, key));
  }
}

// The checkpoint.dir of the launch that last wrote `record` ("" when none, or not a config).
std::string recorded_checkpoint_dir(const RunRecord& record) {
  try {
    const toml::table config = parse_guarded(record.config, kRunRecordName);
    return config["checkpoint"]["dir"].value_or(std::string());
  } catch (const toml::parse_error&) {
    return "";
  } catch (const UserError&) {  // a key too deep: no config of ours
    return "";
  }
}

// Exit 2 when output.dir `out`, owned by run `run_id`, holds another branch of the run: its
// metrics.csv and config.toml follow the checkpoints of the checkpoint.dir its run.json names, and
// this run neither writes that directory nor goes on from its `latest`. A fine-tune inherits the
// id of the run it loads (docs/checkpoints.md, "One owner per directory"), so the id alone would
// let it replace the base's (or another fine-tune's) metrics after its step and config.toml,
// leaving them no longer matching those checkpoints. Not refused: that directory gone, or without
// a `latest` of the run (moved away, or given to another run); output.overwrite = true.
void refuse_other_branch(const DirState& out, const Config& config, const Start& start,
                         const std::string& run_id) {
  // A fresh run has this id only as the same command again (checkpoint.* aside): it writes the
  // same metrics, whichever checkpoint.dir it has.
  if (!start.resumed) return;
  if (!out.record || out.record->run_id != run_id || out.files.empty()) return;
  if (config.output.overwrite) return;
  const std::string followed = recorded_checkpoint_dir(*out.record);
  if (followed.empty() || same_dir(followed, config.checkpoint.dir)) return;
  std::optional<std::string> latest;
  try {
    latest = latest_checkpoint(followed);
  } catch (const UserError&) {
    return;
  }
  if (!latest || checkpoint_metadata_value(*latest, "run_id") != run_id) return;
  if (same_checkpoint(start.path.string(), *latest)) return;  // goes on from it
  const std::string self =
      fmt::format("resumes that run from '{}' (step {})", start.path.string(), start.step);
  const std::string into = config.checkpoint.dir.empty()
                               ? std::string("without a checkpoint.dir")
                               : fmt::format("with checkpoint.dir '{}'", config.checkpoint.dir);
  throw UserError(fmt::format(
      "output.dir '{}' holds the outputs of another branch of run {}: they follow checkpoint.dir "
      "'{}' (its {}), whose latest is step {} ('{}'). This run {} {}, and would rewrite its "
      "metrics.csv after step {} and its config.toml, so that they no longer match those "
      "checkpoints (a fine-tune inherits the run id of the checkpoint it loads). Choose: a new "
      "directory for this run (--set output.dir=DIR), go on from that branch (--set "
      "checkpoint.dir='{}' --set checkpoint.resume=true), or output.overwrite = true to give the "
      "directory to this run",
      out.dir, run_id, followed, kRunRecordName, latest_step(followed), *latest, self, into,
      start.step, followed));
}

// Why the launch is not the same command as the one that last wrote `record` ("" when it is).
std::string why_not_same(const RunRecord& record, const Launch& launch) {
  std::vector<std::string> why;
  if (record.command != launch.command) {
    why.push_back(fmt::format("it was written by `zerolap {}`", escaped_excerpt(record.command)));
  }
  if (record.world_size != launch.world_size) {
    why.push_back(fmt::format("it ran on {} ranks, this run has {}", record.world_size,
                              launch.world_size));
  }
  if (const auto keys = result_differences(record.config, launch.config); !keys.empty()) {
    why.push_back(fmt::format("its config differs in {}", name_list(keys)));
  }
  return fmt::format("{}", fmt::join(why, "; "));
}

// Exit 2: `s` holds another run's files: of its key's kind, or (`other_kind`) of the other key's,
// which no overwrite key gives to this run.
[[noreturn]] void refuse(const DirState& s, const Launch& launch, const Start& start,
                         const std::string& run_id, bool other_kind) {
  std::string owner;
  if (s.record) {
    const std::string why = why_not_same(*s.record, launch);
    owner = fmt::format("run {} (its {}{}{})", escaped_excerpt(s.record->run_id), kRunRecordName,
                        why.empty() ? "" : "; ", why);
  } else {
    const bool outputs = s.key == std::string("output.dir");
    owner = fmt::format("a run that recorded no identity (no {}: written by an older zerolap or "
                        "by hand{})",
                        kRunRecordName, outputs ? legacy_config_note(s.dir, launch.config) : "");
  }
  // A checkpoint that cannot be read (a damaged file or manifest, a FIFO): say what it is.
  for (const DirCheckpoint& c : s.checkpoints) {
    if (c.run_id) continue;
    const std::string path = (fs::path(s.dir) / c.name).string();
    try {
      if (const auto manifest = sharded_manifest_of(path)) {
        read_manifest(*manifest);
      } else {
        const SafetensorsReader file(path);
      }
    } catch (const UserError& e) {
      owner += fmt::format("; {} is unreadable ({})", c.name, e.what());
    }
    break;
  }
  std::string self = "This run is a fresh start";
  if (start.resumed) {
    self = fmt::format("This run resumes run {} from '{}'",
                       start.run_id.empty() ? run_id : start.run_id, start.path.string());
  } else if (!start.found_nothing_in.empty()) {
    self = fmt::format("This run starts at step 0: checkpoint.resume = true found no latest in "
                       "'{}', so nothing to resume",
                       start.found_nothing_in);
  }
  if (other_kind) {
    const bool outputs = s.key == std::string("output.dir");
    throw UserError(fmt::format(
        "{} '{}' is another run's {}: {}; it holds {}. {}, and one directory is not two runs' "
        "output.dir and checkpoint.dir: its {} would name this run, and that run could no longer "
        "write there (no overwrite key gives it to this run). Choose a new directory for this run "
        "(--set {}=DIR)",
        s.key, s.dir, outputs ? "checkpoint.dir" : "output.dir", owner, name_list(s.other_files),
        self, kRunRecordName, s.key));
  }
  std::string choices;
  if (launch.command == std::string("bench")) {
    choices = "a new directory (--set output.dir=DIR)";
  } else if (!start.found_nothing_in.empty()) {
    choices = fmt::format("a checkpoint.dir that holds that run's checkpoints (to resume it), a "
                          "new directory (--set {}=DIR)",
                          s.key);
  } else if (start.resumed) {
    choices = fmt::format("a new directory for this run (--set {}=DIR)", s.key);
  } else {
    choices = fmt::format("resume that run (--set checkpoint.resume=true, with its "
                          "checkpoint.dir), a new directory (--set {}=DIR)",
                          s.key);
  }
  throw UserError(fmt::format(
      "{} '{}' belongs to another run: {}; it holds {}. {}, and a directory is written only by the "
      "run that owns it. Choose: {}, or {} = true to give the directory to this run{}",
      s.key, s.dir, owner, name_list(s.files), self, choices, s.overwrite_key,
      s.key == std::string("checkpoint.dir") ? " (the other run's checkpoints are removed)" : ""));
}

enum class Verdict { Own, Claim, Take };

// Whether the run `run_id` may write into `s`; exit 2 when not. `both_keys`: `s` is this run's
// output.dir and checkpoint.dir at once.
Verdict judge(const DirState& s, const Launch& launch, const Start& start,
              const std::string& run_id, bool overwrite, bool both_keys) {
  if (s.record && s.record->run_id == run_id) return Verdict::Own;
  // Another run's checkpoint.dir taken as this run's output.dir (or the reverse) would get this
  // run's run.json, and that run's next launch would be refused there; taking it as both keys is
  // the rule below, where checkpoint.overwrite removes the other run's checkpoints.
  if (!s.other_files.empty() && !both_keys) refuse(s, launch, start, run_id, true);
  if (s.files.empty()) return Verdict::Claim;  // nothing of another run's is there to lose
  if (!overwrite) refuse(s, launch, start, run_id, false);
  return Verdict::Take;
}

bool same_command(const DirState& s, const Launch& launch) {
  return s.record && !s.files.empty() && why_not_same(*s.record, launch).empty();
}

void print_line(bool quiet, const std::string& line) {
  if (quiet) return;
  std::printf("zerolap: %s\n", line.c_str());
  std::fflush(stdout);
}

// When output.dir's files are taken: the claim's taken_files (those of `s.files` this launch does
// not write, in `writes`; it replaces the others by writing them) and taken_note.
void take_outputs(const DirState& s, Verdict verdict, const std::vector<std::string>& writes,
                  RunOutputsClaim& claim) {
  if (verdict != Verdict::Take) return;
  std::vector<std::string> replaced;
  for (const std::string& name : s.files) {
    // Only files go: a directory or a FIFO under an output's name is refused, not removed.
    const std::string path = (fs::path(s.dir) / name).string();
    struct stat st = {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      throw UserError(fmt::format("output.overwrite = true would replace '{}', which is not a "
                                  "regular file (it is {}): move it out of '{}', or choose "
                                  "another directory (--set output.dir=DIR)",
                                  path, file_type_name(st.st_mode), s.dir));
    }
    const bool written = std::find(writes.begin(), writes.end(), name) != writes.end();
    (written ? replaced : claim.taken_files).push_back(name);
  }
  std::vector<std::string> parts;
  if (!replaced.empty()) parts.push_back("replacing " + name_list(replaced));
  if (!claim.taken_files.empty()) parts.push_back("removing " + name_list(claim.taken_files));
  claim.taken_note = fmt::format("output.overwrite = true: {}outputs in '{}': {}",
                                 s.record ? fmt::format("run {}'s ", s.record->run_id) : "",
                                 s.dir, fmt::join(parts, "; "));
}

}  // namespace

RunOutputsClaim check_run_outputs(Config& config, int world_size) {
  const Launch launch{"train", world_size, to_toml(config)};
  const CheckpointConfig& ck = config.checkpoint;
  refuse_inside_checkpoint("output.dir", config.output.dir, ck.dir);
  if (!ck.dir.empty()) refuse_inside_checkpoint("checkpoint.dir", ck.dir, ck.dir);
  const Start start = find_start(ck);
  const DirState out = output_state(config.output.dir);
  const bool has_ck = !ck.dir.empty();
  const DirState cks = has_ck ? checkpoint_state(ck.dir) : DirState{};

  // The identity: a resume's is its checkpoint's; a resume with nothing to resume yet (a crash
  // before `latest` first named a checkpoint), into the directories of one training run, is that
  // run restarting, on any world size; the same command again is the run it repeats.
  std::string run_id = start.run_id;
  const bool restart = !start.resumed && ck.resume && cks.record && out.record &&
                       cks.record->command == std::string("train") &&
                       out.record->run_id == cks.record->run_id;
  bool repeat = false;  // the same command again
  if (!start.resumed) {
    if (restart) {
      run_id = cks.record->run_id;
    } else if (same_command(out, launch)) {
      run_id = out.record->run_id;
      repeat = true;
    } else if (has_ck && same_command(cks, launch)) {
      run_id = cks.record->run_id;
      repeat = true;
    }
  }
  if (run_id.empty()) run_id = new_run_id();

  refuse_other_branch(out, config, start, run_id);
  const bool both_keys = has_ck && same_dir(config.output.dir, ck.dir);
  const Verdict out_verdict =
      judge(out, launch, start, run_id, config.output.overwrite, both_keys);
  const Verdict ck_verdict =
      has_ck ? judge(cks, launch, start, run_id, ck.overwrite, both_keys) : Verdict::Claim;

  RunOutputsClaim claim;
  if (has_ck) {
    std::error_code ec;
    // The checkpoint resumed: a file, or a sharded checkpoint's directory (named or its manifest).
    fs::path resumed = start.path;
    if (resumed.filename().empty() || resumed.filename() == kManifestName) {
      resumed = resumed.parent_path();
    }
    const fs::path parent = resumed.has_parent_path() ? resumed.parent_path() : ".";
    const bool resumed_here = start.resumed && fs::equivalent(ck.dir, parent, ec);
    if (resumed_here) claim.keep_name = resumed.filename().string();
    const bool outside = start.resumed && !resumed_here;
    std::vector<std::string> later, others, foreign;
    bool latest_is_later = false, at_start = false;
    std::int64_t newest_later = -1;  // the step of later's last (the steps ascend)
    const std::int64_t latest = latest_step(ck.dir);
    for (const DirCheckpoint& c : cks.checkpoints) {
      if (c.name == claim.keep_name) continue;
      const bool own = c.run_id && *c.run_id == run_id;
      // From outside checkpoint.dir, the run's checkpoint at the very step it starts from is
      // another branch's (a fine-tune's: they share the run id) unless it is the one it loads.
      const bool other_branch =
          outside && own && c.step == start.step &&
          !same_checkpoint((fs::path(ck.dir) / c.name).string(), start.path.string());
      if (own && (c.step > start.step || other_branch)) {
        later.push_back(c.name);
        newest_later = c.step;
        latest_is_later = latest_is_later || c.step == latest;
        at_start = at_start || other_branch;
      }
      if (!own && ck_verdict == Verdict::Take) others.push_back(c.name);
      // Another run's checkpoint (copied in by hand, or written before run ids) under a name this
      // run may write (a later step, in its format): the write would replace it, and `keep` then
      // prune it as this run's.
      const std::string would_write = config.checkpoint.format == CheckpointFormat::Sharded
                                          ? sharded_dir_name(c.step)
                                          : checkpoint_file_name(c.step);
      if (!own && c.run_id && ck_verdict != Verdict::Take && c.step > start.step &&
          c.name == would_write) {
        foreign.push_back(fmt::format("{} (run {})", c.name,
                                      c.run_id->empty() ? std::string("written before run ids")
                                                        : escaped_excerpt(*c.run_id)));
        if (ck.overwrite) others.push_back(c.name);
      }
    }
    if (!foreign.empty() && !ck.overwrite) {
      const bool one = foreign.size() == 1;
      const char* them = one ? "it" : "them";
      throw UserError(fmt::format(
          "checkpoint.dir '{}' holds {} after step {}, under names this run (run {}) writes: "
          "{}. This run would replace {} and then prune {} as its own. Choose: move {} out "
          "of the directory, a new directory (--set checkpoint.dir=DIR), or checkpoint.overwrite "
          "= true to remove {}",
          ck.dir, one ? "another run's checkpoint" : "other runs' checkpoints", start.step, run_id,
          name_list(foreign), them, them, them, them));
    }
    // The same command again from step 0 would remove the run's checkpoints: refused where they
    // are progress to go on from (the run stopped short of its last step: train.steps, or for
    // train.epochs the newest checkpoint's own count).
    if (repeat && !later.empty() && !ck.overwrite) {
      const std::string newest = (fs::path(ck.dir) / later.back()).string();
      std::int64_t last_step = config.train.steps;
      if (last_step == 0) {
        const auto total = checkpoint_metadata_value(newest, "total_steps");
        last_step = total ? parse_count(*total).value_or(0) : 0;
      }
      if (newest_later < last_step) {
        throw UserError(fmt::format(
            "run {} stopped before its last step ({}): checkpoint.dir '{}' holds its checkpoints "
            "up to step {} ({}), which the same command again would remove to start over from "
            "step 0. Choose: go on from them (--set checkpoint.resume=true), a new directory "
            "(--set checkpoint.dir=DIR), or checkpoint.overwrite = true to remove them and start "
            "over",
            run_id, last_step, ck.dir, newest_later, name_list(later)));
      }
    }
    // A branch from a checkpoint in checkpoint.dir replaces the run's later ones there, as asked.
    // From one elsewhere (a fine-tune of a base run, which inherits its id) it would remove what
    // another branch, or this command before a crash, wrote and `latest` names: refused.
    if (outside && latest_is_later && !ck.overwrite) {
      throw UserError(fmt::format(
          "checkpoint.dir '{}' holds run {}'s checkpoints {} step {}, up to step {} (latest): "
          "{}. This run resumes that run from '{}', outside checkpoint.dir, and would remove "
          "them: they are another branch of the run, or this command's own before it stopped. "
          "Choose: go on from them (--set checkpoint.resume=true), a new directory (--set "
          "checkpoint.dir=DIR), or checkpoint.overwrite = true to remove them and go on from "
          "step {}",
          ck.dir, run_id, at_start ? "from" : "after", start.step, latest, name_list(later),
          start.path.string(), start.step));
    }
    std::vector<std::string> lines;
    if (!others.empty()) {
      lines.push_back(fmt::format("checkpoint.overwrite = true: removing {} checkpoint{} of other "
                                  "runs from '{}': {}",
                                  others.size(), others.size() == 1 ? "" : "s", ck.dir,
                                  name_list(others)));
    }
    if (!later.empty()) {
      lines.push_back(
          start.resumed
              ? fmt::format("resuming run {} from step {}: removing its later checkpoints in '{}' "
                            "({}); {}",
                            run_id, start.step, ck.dir, name_list(later),
                            config.train.steps > 0 && start.step >= config.train.steps
                                ? fmt::format("this run trains nothing (train.steps = {})",
                                              config.train.steps)
                                : std::string("this run writes its own as it reaches those steps"))
              : fmt::format("{}: removing run {}'s checkpoints in '{}' ({}); this run writes "
                            "them again",
                            restart ? "restarting from step 0 (nothing to resume)"
                                    : "the same command again",
                            run_id, ck.dir, name_list(later)));
    }
    claim.removals = others;
    claim.removals.insert(claim.removals.end(), later.begin(), later.end());
    claim.removal_note = fmt::format("{}", fmt::join(lines, "\nzerolap: "));
  }
  std::vector<std::string> writes = {"metrics.csv", "config.toml"};
  if (config.output.trace) writes.push_back("trace.json");
  take_outputs(out, out_verdict, writes, claim);
  claim.record = RunRecord{run_id, launch.command, world_size, launch.config};
  claim.checkpoint_dir = ck.dir;
  config.run_id = run_id;
  return claim;
}

RunOutputsClaim check_bench_outputs(Config& config, int world_size) {
  const Launch launch{"bench", world_size, to_toml(config)};
  refuse_inside_checkpoint("output.dir", config.output.dir, "");
  const DirState out = output_state(config.output.dir);
  const std::string run_id = same_command(out, launch) ? out.record->run_id : new_run_id();
  RunOutputsClaim claim;
  std::vector<std::string> writes = {"bench.json", "bench.csv"};
  if (config.output.trace) writes.push_back("trace.json");
  take_outputs(out,
               judge(out, launch, Start{}, run_id, config.output.overwrite, /*both_keys=*/false),
               writes, claim);
  claim.record = RunRecord{run_id, launch.command, world_size, launch.config};
  config.run_id = run_id;
  return claim;
}

void claim_run_outputs(const Config& config, const RunOutputsClaim& claim, bool quiet) {
  if (!claim.taken_note.empty()) print_line(quiet, claim.taken_note);
  for (const std::string& name : claim.taken_files) {
    const fs::path file = fs::path(config.output.dir) / name;
    std::error_code ec;
    fs::remove(file, ec);
    if (ec) {
      throw RuntimeFailure(fmt::format("cannot remove the other run's '{}' (output.overwrite = "
                                       "true): {}",
                                       file.string(), ec.message()));
    }
  }
  // A trace or bench results being written go to `<name>.partial` first (replace_whole_file);
  // a process killed meanwhile leaves that file, as large as the output, and only a later launch
  // that writes the same output would replace it. The directory is this launch's now and locked,
  // so no one writes them: they go. Only regular files: a link there is someone's own.
  for (const char* name : kRunOutputFiles) {
    const fs::path partial = fs::path(config.output.dir) / (std::string(name) + kPartialSuffix);
    struct stat st = {};
    std::error_code ec;
    if (::lstat(partial.c_str(), &st) == 0 && S_ISREG(st.st_mode)) fs::remove(partial, ec);
  }
  write_run_record(config.output.dir, claim.record);
  if (!claim.checkpoint_dir.empty()) write_run_record(claim.checkpoint_dir, claim.record);
}

void apply_checkpoint_removals(const Config& config, const RunOutputsClaim& claim, bool quiet) {
  if (claim.removals.empty()) return;
  const std::string& dir = config.checkpoint.dir;
  print_line(quiet, claim.removal_note);
  // `latest` first, so it never names a removed file: the newest of this run's that stay.
  std::string newest;
  for (const DirCheckpoint& c : list_checkpoints(dir)) {
    const bool gone =
        std::find(claim.removals.begin(), claim.removals.end(), c.name) != claim.removals.end();
    const bool own = (c.run_id && *c.run_id == config.run_id) || c.name == claim.keep_name;
    if (!gone && own) newest = c.name;
  }
  std::error_code ec;
  if (newest.empty()) {
    fs::remove(fs::path(dir) / kLatestPointerName, ec);
    sync_directory(dir);
  } else {
    write_latest_pointer(dir, newest);
  }
  for (const std::string& name : claim.removals) remove_checkpoint(dir, name);
  sync_directory(dir);
}

}  // namespace zl
