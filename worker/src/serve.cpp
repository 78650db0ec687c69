// The request loop of `qgate-worker serve`: prepare a profile's distinct GEMMs once, then time
// the whole profile on each run request; a shutdown releases everything and says what is left.
// Every answer carries the process's memory readings. A failure is answered as a record, never a
// crash. After the timed part of each run, an untimed output head gives the run's greedy tokens
// (output_head.h), which qgated compares across the arms of a job.
#include "qgate/worker/serve.h"

#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/util/delimited_message_util.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "qgate/worker/bench.h"
#include "qgate/worker/cuda_failure.h"
#include "qgate/worker/memory_probe.h"
#include "qgate/worker/output_head.h"
#include "qgate/worker/parity.h"
#include "qgate/worker/problems.h"
#include "qgate/worker/worker_errors.h"

namespace qgate::worker {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A prepared profile: one resident GEMM per distinct (type, od, k), inputs per distinct k, and
/// the output head of the output-identity check.
/// Destroyed in reverse: the head's buffers and GEMM, the buffers, the GEMMs, then the context.
struct PreparedProfile {
  v1::ModelProfile profile;
  int64_t tokens = 0;
  std::unique_ptr<BuildContext> ctx;
  std::vector<std::unique_ptr<PreparedGemm>> gemms;  // parallel to profile.gemms
  std::map<int64_t, DeviceBuffer> inputs;            // by k
  DeviceBuffer output;
  // The head: the profile's "output" GEMM, or `own_head` when the profile has none. Null when the
  // build cannot run the fallback head's type (the run then carries no output).
  PreparedGemm* head = nullptr;
  std::unique_ptr<PreparedGemm> own_head;
  int64_t head_od = 0;
  int64_t head_rows = 0;
  DeviceBuffer head_input;   // head_rows x k hidden states
  DeviceBuffer head_output;  // head_rows x head_od logits
};

/// Fills `cuda` when the device holds an error a failed build call left behind.
template <typename Record>
void note_left_behind(DeviceApi& device, Record* record) {
  if (auto failure = cuda_failure_left_behind(device)) {
    record->set_message(record->message() + " (" + failure->error() + ")" + last_build_call_note(*failure));
    *record->mutable_cuda() = *failure;
  }
}

/// The message and CudaFailure of a device error.
template <typename Record>
void note_device_error(const DeviceError& e, Record* record) {
  std::string message = std::string(e.out_of_memory() ? "OUT_OF_MEMORY: " : "DEVICE: ") + e.what();
  if (auto failure = cuda_failure_of(e)) {
    message += last_build_call_note(*failure);
    *record->mutable_cuda() = *failure;
  }
  record->set_message(message);
}

v1::GemmPath proto_path(int path) { return path == QGATE_PATH_MMQ ? v1::GEMM_PATH_MMQ : v1::GEMM_PATH_F16; }

/// Prepares the output head (output_head.h) once the profile's GEMMs are: reuses the profile's
/// "output" GEMM, else prepares a q6_K head of its own from `seed`; builds and uploads the hidden
/// states. Returns false with `done` filled when the build fails on the head.
bool prepare_head(DeviceApi& device, int threads, uint64_t seed, const OutputHeadChoice& choice,
                  const std::vector<uint8_t>* profile_head_weights, PreparedProfile& p, v1::PrepareDone& done) {
  p.head_rows = output_head_rows(p.tokens);
  p.head_od = choice.od;
  const uint64_t head_seed = output_head_seed(seed, choice, p.head_rows);
  std::vector<uint8_t> own_weights;
  const std::vector<uint8_t>* weights = profile_head_weights;
  if (choice.profile_index >= 0) {
    p.head = p.gemms[size_t(choice.profile_index)].get();
  } else {
    own_weights = make_weights(choice.type, choice.od, choice.k, head_seed);
    weights = &own_weights;
    p.own_head = std::make_unique<PreparedGemm>(*p.ctx, int32_t(choice.type), choice.od, choice.k,
                                                own_weights.data(), p.head_rows);
    if (!p.own_head->ok()) {
      if (p.own_head->status() == QGATE_ERR_UNSUPPORTED) {  // no check rather than no job
        p.own_head.reset();
        return true;
      }
      done.set_outcome(v1::CASE_OUTCOME_ERROR);
      done.set_message("output head: " + std::string(to_string(p.own_head->status())) + ": " +
                       p.own_head->message());
      note_left_behind(device, &done);
      return false;
    }
    p.head = p.own_head.get();
  }
  const auto inputs =
      make_output_head_inputs(choice.type, weights->data(), choice.od, choice.k, p.head_rows, head_seed, threads);
  p.head_input = DeviceBuffer(device, inputs.hidden.size() * sizeof(float));
  device.upload(p.head_input.as<void>(), inputs.hidden.data(), inputs.hidden.size() * sizeof(float));
  p.head_output = DeviceBuffer(device, size_t(p.head_rows) * size_t(p.head_od) * sizeof(float));
  return true;
}

/// Runs the head once, untimed, and puts its logits in `run` for the judge, which makes the greedy
/// tokens (serve_judge.h). A build error or a device error fails the run as a failed timed run
/// does; false then.
bool run_head(DeviceApi& device, PreparedProfile& p, v1::ProfileRun& run) {
  if (!p.head) return true;
  const qgate_status status =
      p.head->run(p.head_input.as<float>(), p.head_rows, p.head_output.as<float>(), device.stream());
  if (status != QGATE_OK) {
    run.set_outcome(v1::CASE_OUTCOME_ERROR);
    run.set_message("output head: " + std::string(to_string(status)) + ": " + p.head->message());
    note_left_behind(device, &run);
    return false;
  }
  device.synchronize();
  std::vector<float> logits(size_t(p.head_rows) * size_t(p.head_od));
  device.download(logits.data(), p.head_output.as<void>(), logits.size() * sizeof(float));
  run.set_head_logits(logits.data(), logits.size() * sizeof(float));
  return true;
}

v1::PrepareDone prepare(const KernelBuild& build, DeviceApi& device, int threads,
                        const v1::PrepareProfileRequest& req, std::unique_ptr<PreparedProfile>* out) {
  const auto t0 = std::chrono::steady_clock::now();
  v1::PrepareDone done;
  done.set_profile(req.profile().name());
  auto p = std::make_unique<PreparedProfile>();
  p->profile = req.profile();
  p->tokens = req.tokens();
  auto refuse = [&](v1::CaseOutcome outcome, const std::string& why) {
    done.set_outcome(outcome);
    done.set_message(why);
    return done;
  };
  if (req.tokens() <= 0 || req.tokens() > (int64_t(1) << 20))
    return refuse(v1::CASE_OUTCOME_INVALID_PROBLEM, "tokens must be in [1, 2^20], got " + std::to_string(req.tokens()));
  if (req.profile().gemms().empty()) return refuse(v1::CASE_OUTCOME_INVALID_PROBLEM, "the profile has no GEMMs");
  const OutputHeadChoice head = choose_output_head(req.profile(), device.backend());
  std::vector<uint8_t> head_weights;  // the profile's "output" GEMM's, kept until the head is built
  try {
    p->ctx = std::make_unique<BuildContext>(build, device.backend(), device.device_ordinal(),
                                            QGATE_PATH_FROM_ENV, threads);
    done.set_path(proto_path(p->ctx->path()));
    *done.mutable_memory_before() = read_memory(device);
    int64_t max_od = 0;
    int64_t resident = 0;
    for (const auto& g : req.profile().gemms()) {
      std::string error;
      auto types = parse_types(g.type(), &error);
      if (!types || types->size() != 1) return refuse(v1::CASE_OUTCOME_INVALID_PROBLEM, error);
      const auto type = types->front();
      if (g.od() <= 0 || g.k() <= 0 || g.count() <= 0 || g.k() % quant::traits(type).block_elems)
        return refuse(v1::CASE_OUTCOME_INVALID_PROBLEM,
                      "bad GEMM " + g.type() + " " + std::to_string(g.od()) + "x" + std::to_string(g.k()));
      const GemmShape shape{req.tokens(), g.od(), g.k()};
      const uint64_t seed = case_seed(req.seed(), type, shape);
      auto weights = make_weights(type, g.od(), g.k(), seed);
      auto gemm = std::make_unique<PreparedGemm>(*p->ctx, int32_t(type), g.od(), g.k(), weights.data(), req.tokens());
      if (!gemm->ok()) {
        refuse(gemm->status() == QGATE_ERR_UNSUPPORTED ? v1::CASE_OUTCOME_NOT_SUPPORTED : v1::CASE_OUTCOME_ERROR,
               std::string(to_string(gemm->status())) + ": " + gemm->message());
        note_left_behind(device, &done);
        return done;
      }
      resident += gemm->resident_bytes();
      if (int(p->gemms.size()) == head.profile_index) head_weights = std::move(weights);
      p->gemms.push_back(std::move(gemm));
      max_od = std::max(max_od, g.od());
      if (!p->inputs.count(g.k())) {
        const auto x = make_activations(req.tokens(), g.k(), seed);
        DeviceBuffer buf(device, x.size() * sizeof(float));
        device.upload(buf.as<void>(), x.data(), x.size() * sizeof(float));
        p->inputs.emplace(g.k(), std::move(buf));
      }
    }
    p->output = DeviceBuffer(device, size_t(req.tokens()) * size_t(max_od) * sizeof(float));
    if (!prepare_head(device, threads, req.seed(), head, &head_weights, *p, done)) return done;
    head_weights = {};
    done.set_resident_bytes(resident);
    *done.mutable_memory_after() = read_memory(device);
  } catch (const DeviceError& e) {
    done.set_outcome(v1::CASE_OUTCOME_ERROR);
    note_device_error(e, &done);
    return done;
  } catch (const std::exception& e) {
    return refuse(v1::CASE_OUTCOME_ERROR, e.what());
  }
  done.set_outcome(v1::CASE_OUTCOME_PASSED);
  done.set_prepare_s(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  *out = std::move(p);
  return done;
}

// Elements of a GEMM's output read back after its timed calls: a build that returns success without
// writing y (docs/security.md) leaves the poison there and its run is INCORRECT.
constexpr int kOutputSamples = 16;

/// "" when every sampled element of the first n outputs was written, else what was found.
std::string unwritten_output(DeviceApi& device, const DeviceBuffer& output, size_t n) {
  int unwritten = 0;
  for (int s = 0; s < kOutputSamples && n > 0; ++s) {
    const size_t i = n == 1 ? 0 : size_t(s) * (n - 1) / (kOutputSamples - 1);
    uint32_t bits = 0;
    device.download(&bits, static_cast<const char*>(output.as<void>()) + i * sizeof(float), sizeof bits);
    unwritten += bits == 0xFFFFFFFFu;
  }
  if (unwritten == 0) return "";
  return std::to_string(unwritten) + " of " + std::to_string(kOutputSamples) +
         " sampled outputs still hold the poison written before the calls: the build did not write y";
}

v1::ProfileRun run_profile(DeviceApi& device, PreparedProfile& p, const v1::RunProfileRequest& req) {
  v1::ProfileRun run;
  run.set_run_id(req.run_id());
  run.set_profile(p.profile.name());
  run.set_tokens(p.tokens);
  run.set_path(proto_path(p.ctx->path()));
  run.set_worker_pid(getpid());
  run.set_started_unix_ms(now_ms());
  const int reps = std::max(1, req.repetitions());
  double total_us = 0;
  try {
    for (size_t i = 0; i < p.gemms.size(); ++i) {
      const auto& g = p.profile.gemms(int(i));
      PreparedGemm& gemm = *p.gemms[i];
      qgate_status status = QGATE_OK;
      auto call = [&] {
        status = gemm.run(p.inputs.at(g.k()).as<float>(), p.tokens, p.output.as<float>(), device.stream());
      };
      const size_t outputs = size_t(p.tokens) * size_t(g.od());
      device.fill_bytes(p.output.as<void>(), kPoisonByte, outputs * sizeof(float));
      for (int w = 0; w < req.warmup() && status == QGATE_OK; ++w) device.time_us(call);
      std::vector<double> samples;
      for (int r = 0; r < reps && status == QGATE_OK; ++r) {
        if (req.cold()) device.flush_cache();
        samples.push_back(device.time_us(call));
      }
      if (status == QGATE_OK)
        if (const std::string unwritten = unwritten_output(device, p.output, outputs); !unwritten.empty()) {
          run.set_outcome(v1::CASE_OUTCOME_INCORRECT);
          run.set_message(g.type() + " " + std::to_string(g.od()) + "x" + std::to_string(g.k()) + ": " + unwritten);
          return run;
        }
      if (status != QGATE_OK) {
        run.set_outcome(v1::CASE_OUTCOME_ERROR);
        run.set_message(std::string(to_string(status)) + ": " + gemm.message());
        note_left_behind(device, &run);
        return run;
      }
      const SampleStats s = summarize(samples);
      auto* t = run.add_gemms();
      *t->mutable_gemm() = g;
      t->set_median_us(s.median);
      t->set_min_us(s.min);
      total_us += s.median * g.count();
    }
  } catch (const DeviceError& e) {
    run.set_outcome(v1::CASE_OUTCOME_ERROR);
    note_device_error(e, &run);
    return run;
  } catch (const std::exception& e) {
    run.set_outcome(v1::CASE_OUTCOME_ERROR);
    run.set_message(e.what());
    return run;
  }
  run.set_gemm_ms(total_us / 1000.0);
  run.set_tokens_per_s(total_us > 0 ? double(p.tokens) / (total_us * 1e-6) : 0.0);
  if (req.whole_pass()) {
    // One event pair around the profile's GEMMs in order, each as many times as the model has it.
    qgate_status status = QGATE_OK;
    std::string failure;
    auto pass = [&] {
      for (size_t i = 0; i < p.gemms.size() && status == QGATE_OK; ++i) {
        const auto& g = p.profile.gemms(int(i));
        for (int64_t c = 0; c < g.count() && status == QGATE_OK; ++c) {
          status = p.gemms[i]->run(p.inputs.at(g.k()).as<float>(), p.tokens, p.output.as<float>(), device.stream());
          if (status != QGATE_OK) failure = p.gemms[i]->message();
        }
      }
    };
    std::vector<double> passes;
    try {
      for (int r = 0; r < reps && status == QGATE_OK; ++r) {
        if (req.cold()) device.flush_cache();
        passes.push_back(device.time_us(pass));
      }
    } catch (const DeviceError& e) {
      run.set_outcome(v1::CASE_OUTCOME_ERROR);
      note_device_error(e, &run);
      return run;
    }
    if (status != QGATE_OK) {
      run.set_outcome(v1::CASE_OUTCOME_ERROR);
      run.set_message(std::string(to_string(status)) + ": " + failure);
      note_left_behind(device, &run);
      return run;
    }
    const double pass_us = summarize(passes).median;
    run.set_pass_ms(pass_us / 1000.0);
    run.set_tokens_per_s(pass_us > 0 ? double(p.tokens) / (pass_us * 1e-6) : 0.0);
  }
  // The output-identity check: after the timed part, not in any figure above.
  try {
    if (!run_head(device, p, run)) return run;
  } catch (const DeviceError& e) {
    run.set_outcome(v1::CASE_OUTCOME_ERROR);
    note_device_error(e, &run);
    return run;
  }
  run.set_finished_unix_ms(now_ms());
  run.set_outcome(v1::CASE_OUTCOME_PASSED);
  return run;
}

// A release that keeps more than this earns a second cycle, so the leak judge can tell memory
// kept once from a leak; below it there is nothing to tell apart.
constexpr int64_t kSecondCycleAboveBytes = int64_t(16) << 20;

int64_t host_figure(const v1::MemoryReading& r) { return r.host_anon_bytes() > 0 ? r.host_anon_bytes() : r.host_rss_bytes(); }

/// Releases every prepared GEMM, the buffers and the build's context, then reads what is left.
/// When that is more than kSecondCycleAboveBytes above the first prepare's reading, prepares the
/// last profile again, runs it once and releases it, and reads once more.
v1::ReleaseDone release(const KernelBuild& build, DeviceApi& device, int threads,
                        std::unique_ptr<PreparedProfile>& prepared, const v1::PrepareProfileRequest* last_prepare,
                        const v1::MemoryReading& first_before) {
  v1::ReleaseDone done;
  // The profile's GEMMs; the output head's own GEMM, where it has one, goes with them uncounted.
  done.set_released_gemms(prepared ? int32_t(prepared->gemms.size()) : 0);
  prepared.reset();
  *done.mutable_memory() = read_memory(device);
  const v1::MemoryReading& after = done.memory();
  const bool kept = (after.device_source() == first_before.device_source() &&
                     after.device_bytes() - first_before.device_bytes() > kSecondCycleAboveBytes) ||
                    host_figure(after) - host_figure(first_before) > kSecondCycleAboveBytes;
  if (!last_prepare || !kept) return done;
  try {
    std::unique_ptr<PreparedProfile> again;
    const v1::PrepareDone second = prepare(build, device, threads, *last_prepare, &again);
    if (second.outcome() != v1::CASE_OUTCOME_PASSED || !again) return done;
    v1::RunProfileRequest once;
    once.set_repetitions(1);
    run_profile(device, *again, once);
    again.reset();
    *done.mutable_memory_after_second_cycle() = read_memory(device);
    done.set_second_cycle(true);
  } catch (const std::exception&) {
    // A second cycle that fails says nothing about the first: the release stands as read.
  }
  return done;
}

}  // namespace

int serve_requests(const KernelBuild& build, DeviceApi& device, int threads, int input_fd,
                   RecordWriter& writer) {
  google::protobuf::io::FileInputStream input(input_fd);
  std::unique_ptr<PreparedProfile> prepared;
  std::optional<v1::PrepareProfileRequest> last_prepare;  // for the release's second cycle
  std::optional<v1::MemoryReading> first_before;          // the first prepare's reading
  // Once a sticky CUDA error has lost the context every later call fails alike, after whatever
  // build call came last: later requests are answered with the failure that lost it.
  std::optional<v1::CudaFailure> lost;
  auto answer_lost = [&](auto* record) {
    record->set_outcome(v1::CASE_OUTCOME_ERROR);
    record->set_message("the CUDA context was lost earlier (" + lost->error() + last_build_call_note(*lost) +
                        "); this worker can run nothing more");
    *record->mutable_cuda() = *lost;
  };
  while (true) {
    v1::WorkerRequest req;
    bool clean_eof = false;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&req, &input, &clean_eof)) {
      if (clean_eof) return 0;
      writer.write(error_record(v1::WORKER_ERROR_KIND_INVALID_REQUEST, "malformed request on stdin"));
      return 2;
    }
    v1::WorkerRecord r;
    switch (req.request_case()) {
      case v1::WorkerRequest::kPrepare:
        prepared.reset();
        if (lost) {
          r.mutable_prepared()->set_profile(req.prepare().profile().name());
          answer_lost(r.mutable_prepared());
        } else {
          *r.mutable_prepared() = prepare(build, device, threads, req.prepare(), &prepared);
          if (r.prepared().outcome() == v1::CASE_OUTCOME_PASSED) last_prepare = req.prepare();
          if (!first_before && r.prepared().has_memory_before()) first_before = r.prepared().memory_before();
        }
        if (r.prepared().cuda().context_lost() && !lost) lost = r.prepared().cuda();
        break;
      case v1::WorkerRequest::kRun:
        if (lost) {
          r.mutable_profile_run()->set_run_id(req.run().run_id());
          answer_lost(r.mutable_profile_run());
          *r.mutable_profile_run()->mutable_memory() = read_memory(device);
        } else if (!prepared) {
          r.mutable_profile_run()->set_run_id(req.run().run_id());
          r.mutable_profile_run()->set_outcome(v1::CASE_OUTCOME_INVALID_PROBLEM);
          r.mutable_profile_run()->set_message("run before a successful prepare");
        } else {
          *r.mutable_profile_run() = run_profile(device, *prepared, req.run());
          *r.mutable_profile_run()->mutable_memory() = read_memory(device);
          if (r.profile_run().cuda().context_lost()) lost = r.profile_run().cuda();
        }
        break;
      case v1::WorkerRequest::kShutdown:
        *r.mutable_released() = release(build, device, threads, prepared, lost ? nullptr : last_prepare ? &*last_prepare : nullptr,
                                         first_before.value_or(v1::MemoryReading()));
        writer.write(r);
        return 0;
      default:
        r = error_record(v1::WORKER_ERROR_KIND_INVALID_REQUEST, "empty request");
        break;
    }
    writer.write(r);
  }
}

}  // namespace qgate::worker
