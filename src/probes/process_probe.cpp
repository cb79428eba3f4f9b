// The process probe: resident memory of this process and its exact high-water mark.
//
// sample():      pread /proc/self/statm, resident pages × page size (one syscall).
// read_peaks():  the kernel's exact peak RSS since the last reset: VmHWM from
//                pread /proc/self/status (~3 us), or getrusage() (~0.3 us) when that is
//                provably the same figure (below).
// reset_peaks(): pwrite "5" to /proc/self/clear_refs, which restarts VmHWM from the
//                current RSS (Linux >= 4.0, owner only).
//
// Why getrusage() can stand in for VmHWM: the kernel computes ru_maxrss as
// max(signal->maxrss, VmHWM), where signal->maxrss keeps the high-water mark of exited
// threads and of the image before exec(); clear_refs does not reset it. Right after a reset
// VmHWM equals the current RSS, so if ru_maxrss is then no larger than the current RSS,
// signal->maxrss is below every later VmHWM of this window (and a thread exiting later can
// only raise it to an in-window VmHWM): ru_maxrss is exactly VmHWM until the next reset.
// Otherwise (a stale larger signal->maxrss) read_peaks() reads /proc/self/status.
// All three files are opened once in open(); every buffer lives on the stack, so the
// sampler thread and the monitor thread may call concurrently.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string_view>

#include "genscope/probe.hpp"
#include "probes/proc_file.hpp"
#include "probes/procfs_probes.hpp"

namespace genscope {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class ProcessProbe final : public Probe {
 public:
  explicit ProcessProbe(const detail::ProcessProbePaths& paths) : paths_(paths) {
    metrics_.push_back({"process.rss_bytes", Unit::kBytes, true});
    use_rusage_ = std::string_view(paths_.status) == "/proc/self/status";
  }

  std::string name() const override { return "process"; }
  const std::vector<MetricInfo>& metrics() const override { return metrics_; }

  ProbeStatus open() override {
    const long page = ::sysconf(_SC_PAGESIZE);
    page_size_bytes_ = page > 0 ? static_cast<double>(page) : 4096.0;
    if (std::string error = statm_.open(paths_.statm, O_RDONLY); !error.empty())
      return ProbeStatus::failure("process probe: " + error);
    if (std::string error = status_.open(paths_.status, O_RDONLY); !error.empty())
      return ProbeStatus::failure("process probe: " + error);
    // clear_refs may be missing or refused (old kernel, seccomp, read-only /proc): the
    // probe still works, only the peak reset does not.
    if (std::string error = clear_refs_.open(paths_.clear_refs, O_WRONLY); !error.empty()) {
      reset_error_ = "VmHWM reset refused: " + error.substr(error.rfind(": ") + 2) +
                     "; peaks fall back to sampling";
      reset_refused_.store(true, std::memory_order_release);
    }
    return {};
  }

  ProbeStatus sample(std::span<double> out) override {
    out[0] = kNaN;
    if (!statm_.is_open()) return ProbeStatus::failure("process probe: not open");
    char buffer[128];
    const long n = statm_.read_into(buffer, sizeof buffer);
    if (n < 0) return failure("pread ", paths_.statm, ": " + detail::errno_text(-n));
    const auto pages = detail::parse_statm_resident_pages({buffer, static_cast<size_t>(n)});
    if (!pages) return failure("", paths_.statm, ": unexpected content");
    out[0] = static_cast<double>(*pages) * page_size_bytes_;
    return {};
  }

  ProbeStatus read_peaks(std::span<double> out) override {
    out[0] = kNaN;
    // Without a working reset VmHWM is the lifetime peak, not the peak since the step
    // started: report nothing and let the monitor use its sampled peak.
    if (reset_refused_.load(std::memory_order_relaxed)) return {};
    if (rusage_exact_.load(std::memory_order_acquire)) {
      if (const double maxrss = rusage_maxrss_bytes(); maxrss >= 0) {
        out[0] = maxrss;
        return {};
      }
    }
    if (!status_.is_open()) return ProbeStatus::failure("process probe: not open");
    char buffer[4096];  // /proc/self/status is ~1.5 KiB; VmHWM sits in the first third
    const long n = status_.read_into(buffer, sizeof buffer);
    if (n < 0) return failure("pread ", paths_.status, ": " + detail::errno_text(-n));
    const auto hwm = detail::parse_kb_field({buffer, static_cast<size_t>(n)}, "VmHWM");
    if (!hwm) return failure("", paths_.status, ": no VmHWM line");
    out[0] = static_cast<double>(*hwm);
    return {};
  }

  ProbeStatus reset_peaks() override {
    if (reset_refused_.load(std::memory_order_acquire)) return ProbeStatus::failure(reset_error_);
    const int rc = clear_refs_.write_text("5");
    if (rc != 0) {
      reset_error_ =
          "VmHWM reset refused: " + detail::errno_text(-rc) + "; peaks fall back to sampling";
      reset_refused_.store(true, std::memory_order_release);
      return ProbeStatus::failure(reset_error_);
    }
    // Decide for this window whether getrusage() reads VmHWM (see the file comment). Only
    // for the real /proc/self files: tests substitute their own.
    bool exact = false;
    if (use_rusage_) {
      const double maxrss = rusage_maxrss_bytes();
      double rss[1];
      exact = maxrss >= 0 && sample(rss).ok() && maxrss <= rss[0];
    }
    rusage_exact_.store(exact, std::memory_order_release);
    return {};
  }

 private:
  static double rusage_maxrss_bytes() {
    rusage u{};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return -1;
    return static_cast<double>(u.ru_maxrss) * 1024.0;  // Linux reports kB
  }

  static ProbeStatus failure(const char* before, const char* path, const std::string& after) {
    return ProbeStatus::failure(before + std::string(path) + after);
  }

  detail::ProcessProbePaths paths_;
  std::vector<MetricInfo> metrics_;
  detail::ProcFile statm_;
  detail::ProcFile status_;
  detail::ProcFile clear_refs_;
  double page_size_bytes_ = 4096.0;
  // Set once (open() or the first refused write) and never cleared; reset_error_ is
  // written before the release store and only read after observing it.
  std::atomic<bool> reset_refused_{false};
  std::string reset_error_;
  bool use_rusage_ = false;                  // the probe reads the real /proc/self files
  std::atomic<bool> rusage_exact_{false};   // getrusage() == VmHWM until the next reset
};

}  // namespace

std::unique_ptr<Probe> make_process_probe() {
  return detail::make_process_probe(detail::ProcessProbePaths{});
}

std::unique_ptr<Probe> detail::make_process_probe(const ProcessProbePaths& paths) {
  return std::make_unique<ProcessProbe>(paths);
}

}  // namespace genscope
