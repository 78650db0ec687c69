// A kernel build that misbehaves on purpose, for the daemon's fault tests and the GPU check. It
// forwards the whole ABI to libqgate_ref.so and injects one fault, chosen at compile time with
// QGATE_FAULT:
//   crash_once       - the first qgate_gemm_run on this machine segfaults (a marker file remembers
//                      it), every later one works: a worker restart and one retry must save the job.
//   crash_run        - every qgate_gemm_run segfaults.
//   segv_prepare     - qgate_gemm_prepare writes through a bad pointer (SIGSEGV).
//   illegal_address  - qgate_gemm_run on CUDA launches a kernel that writes through a bad device
//                      pointer, so the CUDA context dies with cudaErrorIllegalAddress; on the CPU
//                      it calls abort().
//   hang             - qgate_gemm_run never returns; it also forks a child that sleeps forever (its
//                      pid goes to the marker file), which only a kill of the whole process group ends.
//   nan_output       - qgate_gemm_run computes, then writes NaN over y.
//   constant_output  - (CPU) qgate_gemm_run computes, then writes 1.0 over y: every path alike wrong,
//                      every output written, so both arms of an A/B agree on the wrong tokens.
//   unwritten_output - qgate_gemm_run returns success without touching y.
//   leak             - qgate_gemm_run allocates memory it never frees (device memory on CUDA, touched
//                      host memory on the CPU), then forwards correctly.
//   forged_records   - a hostile build: as it is loaded, it writes a well-formed record stream of
//                      192 PASSED parity cases and a matching summary to stdout and to every pipe
//                      its process holds; qgate_gemm_run computes nothing.
//   chatty_stdout    - prints debug text to stdout as it loads and in every call, then forwards
//                      correctly: its output must not reach the records qgated reads.
//   pool_once        - forwards correctly, and keeps a pool the first time it runs in a process, as a
//                      library's allocator or handles do (512 MiB of device memory on CUDA, 64 MiB
//                      of touched host memory on the CPU), never freed and never grown: memory kept
//                      once, which the leak judge must not call a leak.
//   kill_parent      - qgate_gemm_run sends SIGKILL to its process's parent (qgated, for a worker):
//                      a daemon that re-ran it at every restart would never stay up.
//   snoop            - forwards correctly, and on its first run tries what a hostile build would:
//                      open the daemon's database (its --data-dir read from /proc/<parent>/cmdline),
//                      connect over TCP, write to /tmp and signal its parent; it writes each
//                      attempt's outcome to stderr ("snoop: open <path>: Permission denied").
//   setsid_child     - forwards correctly, and on its first run starts a child in a session of its own
//                      (setsid), out of reach of a kill of the worker's process group; the child holds
//                      every descriptor the worker had, says "setsid child: pid <n>" on stderr and
//                      sleeps for ten minutes. It must be gone when its job ends.
//   crash_with_child - starts the same child on its first run, then segfaults: the worker is dead while
//                      its child still holds its pipes, which must read as CRASHED, not as a hang.
//   memory_hog       - on its first run touches 1 GiB of host memory more every call, never freed: a
//                      build that exhausts the host, which its worker's cgroup must stop.
//   name_not_utf8    - forwards correctly, and names itself with bytes that are not UTF-8.
//   name_80mib       - forwards correctly, and names itself with an 80 MiB string. Neither name can
//                      be stored or shown: the build is REJECTED for its declaration.
//   idle_spinner     - forwards correctly, and runs a background thread that burns a core whenever
//                      none of its own calls is in flight: left running, it slows the other arm of
//                      an A/B while that arm is timed, and so reads faster than it is.
// libqgate_ref.so is looked for beside this file (and one folder up, the bundle's plugins/), then
// by plain name (LD_LIBRARY_PATH), then at the compile-time QGATE_REF_LIBRARY_PATH: qgated runs
// uploads from its own artifact store, where nothing lies beside them.
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fault_device.h"
#include "qgate/kernel_abi.h"
#include "qgate/kernel_abi_table.h"

#ifndef QGATE_FAULT_MARKER
#define QGATE_FAULT_MARKER ""
#endif

namespace {

constexpr size_t kLeakBytesCuda = size_t(64) << 20;  // per qgate_gemm_run
constexpr size_t kLeakBytesCpu = size_t(4) << 20;

bool fault_is(const char* name) { return std::strcmp(QGATE_FAULT, name) == 0; }

struct RefAbi : qgate::abi::EntryPoints {
  void* handle = nullptr;
};

/// The folder this shared object was loaded from ("" when unknown).
std::string own_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_folder), &info) == 0 || !info.dli_fname) return "";
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

void* open_reference(std::string* tried) {
  std::vector<std::string> candidates;
  const std::string folder = own_folder();
  if (!folder.empty()) {
    candidates.push_back(folder + "/libqgate_ref.so");
    candidates.push_back(folder + "/../libqgate_ref.so");
  }
  candidates.push_back("libqgate_ref.so");
#ifdef QGATE_REF_LIBRARY_PATH
  candidates.push_back(QGATE_REF_LIBRARY_PATH);
#endif
  for (const auto& c : candidates) {
    // A file of the same name as this one would load itself: only a real libqgate_ref.so counts.
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      if (dlsym(h, "qgate_gemm_run") != reinterpret_cast<void*>(&qgate_gemm_run)) return h;
      dlclose(h);
    }
    *tried += (tried->empty() ? "" : ", ") + c;
  }
  return nullptr;
}

const RefAbi& ref() {
  static const RefAbi abi = [] {
    RefAbi a;
    std::string tried;
    a.handle = open_reference(&tried);
    if (!a.handle) {
      std::fprintf(stderr, "qgate-fault-%s: cannot load libqgate_ref.so (tried %s)\n", QGATE_FAULT, tried.c_str());
      std::abort();
    }
    if (const std::string missing = qgate::abi::bind_entry_points(a.handle, &a); !missing.empty()) {
      std::fprintf(stderr, "qgate-fault-%s: libqgate_ref.so does not export %s\n", QGATE_FAULT, missing.c_str());
      std::abort();
    }
    return a;
  }();
  return abi;
}

// What the faults need to know about the GEMMs the reference prepared: the backend of their
// context and their output width.
struct GemmFacts {
  int32_t backend = QGATE_BACKEND_CPU;
  int64_t od = 0;
};
std::mutex g_mu;
std::map<const qgate_context*, int32_t> g_context_backend;
std::map<const qgate_gemm*, GemmFacts> g_gemms;

GemmFacts facts_of(const qgate_gemm* g) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_gemms.find(g);
  return it == g_gemms.end() ? GemmFacts{} : it->second;
}

void write_marker_line(const std::string& text) {
  const std::string marker = QGATE_FAULT_MARKER;
  if (marker.empty()) return;
  const int fd = open(marker.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const ssize_t ignored = write(fd, text.data(), text.size());
  (void)ignored;
  close(fd);
}

void write_through_bad_pointer() {
  // Read through a volatile so the compiler cannot see the address and emit a trap instead.
  volatile uintptr_t address = 16;
  *reinterpret_cast<volatile int*>(address) = 1;
}

[[noreturn]] void hang_forever() {
  const pid_t child = fork();
  if (child == 0) {
    for (;;) pause();  // stays in the worker's process group
  }
  if (child > 0) write_marker_line(std::to_string(child) + "\n");
  for (;;) sleep(1);
}

void crash_if_first_run() {
  // O_EXCL: exactly one run anywhere creates the marker, and that run crashes.
  const int fd = open(QGATE_FAULT_MARKER, O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd >= 0) {
    close(fd);
    raise(SIGSEGV);
  }
}

void* volatile g_last_leaked_block = nullptr;

void leak_memory(int32_t backend) {
  if (backend == QGATE_BACKEND_CUDA) {
    if (!qgate_fault_device_leak(kLeakBytesCuda)) std::fprintf(stderr, "qgate-fault-leak: device allocation failed\n");
    return;
  }
  void* block = std::malloc(kLeakBytesCpu);
  if (block) std::memset(block, 0x5A, kLeakBytesCpu);  // touched, so it is resident, and never freed
  // The last block escapes through a volatile: a compiler may drop a malloc whose pointer goes
  // nowhere (and the memset with it), which would leak nothing at all.
  g_last_leaked_block = block;
}

// A child in its own session that keeps the worker's descriptors, once per process.
void start_setsid_child_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const pid_t child = fork();
    if (child == 0) {
      setsid();
      for (int i = 0; i < 600; ++i) sleep(1);
      _exit(0);
    }
    // The parent names the child, before it returns (and perhaps crashes): a line the child wrote
    // itself could be lost when qgated ends it first.
    char line[64];
    const int n = std::snprintf(line, sizeof line, "setsid child: pid %d\n", int(child));
    if (child > 0 && n > 0) (void)!write(2, line, size_t(n));
  });
}

void snoop_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    const pid_t parent = getppid();
    std::string cmdline;
    if (FILE* f = std::fopen(("/proc/" + std::to_string(parent) + "/cmdline").c_str(), "rb")) {
      char buf[4096];
      const size_t n = std::fread(buf, 1, sizeof buf, f);
      cmdline.assign(buf, n);
      std::fclose(f);
    }
    std::vector<std::string> args;
    for (size_t at = 0; at < cmdline.size();) {
      const size_t end = cmdline.find('\0', at);
      args.push_back(cmdline.substr(at, end - at));
      at = end == std::string::npos ? cmdline.size() : end + 1;
    }
    auto report = [](const std::string& what, bool ok) {
      std::fprintf(stderr, "snoop: %s: %s\n", what.c_str(), ok ? "ok" : std::strerror(errno));
    };
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--data-dir") {
        const std::string db = args[i + 1] + "/qgate.db";
        const int fd = open(db.c_str(), O_RDONLY | O_CLOEXEC);
        report("open " + db, fd >= 0);
        if (fd >= 0) close(fd);
      }
    const int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(9);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const bool connected = sock >= 0 && connect(sock, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0;
    // Refused means the attempt reached the network stack: only EACCES/EPERM means it was stopped.
    report("tcp connect", connected);
    if (sock >= 0) close(sock);
    const std::string tmp = "/tmp/qgate-snoop-" + std::to_string(getpid());
    const int file = open(tmp.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    report("write " + tmp, file >= 0);
    if (file >= 0) {
      close(file);
      unlink(tmp.c_str());
    }
    report("signal the daemon", ::kill(parent, 0) == 0);
    std::fflush(stderr);
  });
}

constexpr size_t kPoolBytesCuda = size_t(512) << 20;
constexpr size_t kPoolBytesCpu = size_t(64) << 20;

void* volatile g_pool = nullptr;
std::once_flag g_pool_once;

void keep_pool_once(int32_t backend) {
  std::call_once(g_pool_once, [backend] {
    if (backend == QGATE_BACKEND_CUDA) {
      if (!qgate_fault_device_leak(kPoolBytesCuda)) std::fprintf(stderr, "qgate-fault-pool_once: device allocation failed\n");
      return;
    }
    void* pool = std::malloc(kPoolBytesCpu);
    if (pool) std::memset(pool, 0x3C, kPoolBytesCpu);  // touched, so it is resident
    g_pool = pool;
  });
}

void fill_nan(float* y, int64_t n, int32_t backend, void* stream) {
  if (backend == QGATE_BACKEND_CUDA) {
    if (!qgate_fault_device_fill_nan(y, n, stream)) std::abort();
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = std::numeric_limits<float>::quiet_NaN();
}

// ---- forged_records: a record stream written by hand in protobuf's wire format ----
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(v | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_varint(out, uint64_t(field) << 3 | 2);
  put_varint(out, bytes.size());
  out += bytes;
}
void put_varint_field(std::string& out, int field, uint64_t v) {
  put_varint(out, uint64_t(field) << 3);
  put_varint(out, v);
}
/// One WorkerRecord, length-delimited: field `record_field` of the record's oneof holds `body`.
std::string delimited_record(int record_field, const std::string& body) {
  std::string record, out;
  put_bytes_field(record, record_field, body);
  put_varint(out, record.size());
  return out + record;
}

std::string forged_stream() {
  constexpr int kCases = 192;
  std::string plan, stream;
  put_varint_field(plan, 1, kCases);  // ParityPlan.cases
  stream += delimited_record(8, plan);
  const char* types[] = {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_K", "q5_K", "q6_K"};
  for (int i = 0; i < kCases; ++i) {
    std::string shape, parity;
    put_varint_field(shape, 1, 8);
    put_varint_field(shape, 2, 64);
    put_varint_field(shape, 3, 256);
    put_bytes_field(parity, 1, types[i % 8]);                  // ParityCase.type
    put_bytes_field(parity, 2, shape);                         // .shape
    put_varint_field(parity, 3, i % 2 ? 1 : 2);                // .path
    put_varint_field(parity, 5, 1);                            // .outcome = PASSED
    stream += delimited_record(2, parity);
  }
  std::string summary;
  put_varint_field(summary, 1, kCases);  // WorkerSummary.cases
  put_varint_field(summary, 2, kCases);  // .passed
  stream += delimited_record(5, summary);
  return stream;
}

void write_all(int fd, const std::string& bytes) {
  for (size_t off = 0; off < bytes.size();) {
    const ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n <= 0) return;
    off += size_t(n);
  }
}

std::atomic<int> g_calls_in_flight{0};

[[noreturn]] void spin_while_idle() {
  volatile uint64_t sink = 0;
  for (;;) {
    if (g_calls_in_flight.load(std::memory_order_relaxed) > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      continue;
    }
    for (int i = 0; i < 100000; ++i) sink = sink + uint64_t(i);
  }
}

__attribute__((constructor)) void misbehave_on_load() {
  if (fault_is("idle_spinner")) std::thread(spin_while_idle).detach();
  if (fault_is("chatty_stdout")) {
    std::printf("chatty build: loaded, hello from the constructor\n");
    std::fflush(stdout);
  }
  if (!fault_is("forged_records")) return;
  const std::string stream = forged_stream();
  write_all(STDOUT_FILENO, stream);
  // Every other pipe this process holds, in case one of them leads to whoever judges it.
  for (int fd = 3; fd < 1024; ++fd) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) write_all(fd, stream);
  }
}

}  // namespace

extern "C" {
QGATE_EXPORT uint32_t qgate_abi_version(void) { return ref().abi_version(); }
QGATE_EXPORT const qgate_build_info* qgate_get_build_info(void) {
  static qgate_build_info info = [] {
    qgate_build_info i = *ref().build_info();
    i.name = "qgate-fault-" QGATE_FAULT;
    if (fault_is("name_not_utf8")) i.name = "qgate-fault-\xff\xfe-latin1-caf\xe9";
    if (fault_is("name_80mib")) {
      static std::string huge(80u << 20, 'n');  // kept for the life of the process, like a literal
      i.name = huge.c_str();
    }
    return i;
  }();
  return &info;
}
QGATE_EXPORT qgate_status qgate_context_create(const qgate_context_options* o, qgate_context** out, char* err,
                                               size_t n) {
  const qgate_status status = ref().context_create(o, out, err, n);
  if (status == QGATE_OK && out && *out && o) {
    std::lock_guard<std::mutex> lock(g_mu);
    g_context_backend[*out] = o->backend;
  }
  return status;
}
QGATE_EXPORT void qgate_context_destroy(qgate_context* c) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_context_backend.erase(c);
  }
  ref().context_destroy(c);
}
QGATE_EXPORT int32_t qgate_context_path(const qgate_context* c) { return ref().context_path(c); }
QGATE_EXPORT const char* qgate_context_last_error(const qgate_context* c) { return ref().context_last_error(c); }
QGATE_EXPORT qgate_status qgate_gemm_prepare(qgate_context* c, int32_t t, int64_t od, int64_t k, const void* w,
                                             int64_t max_nt, qgate_gemm** out) {
  if (fault_is("segv_prepare")) write_through_bad_pointer();
  const qgate_status status = ref().gemm_prepare(c, t, od, k, w, max_nt, out);
  if (status == QGATE_OK && out && *out) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto backend = g_context_backend.find(c);
    g_gemms[*out] = {backend == g_context_backend.end() ? int32_t(QGATE_BACKEND_CPU) : backend->second, od};
  }
  return status;
}
QGATE_EXPORT qgate_status qgate_gemm_run(qgate_gemm* g, const float* x, int64_t nt, float* y, void* stream) {
  const GemmFacts facts = facts_of(g);
  struct InFlight {
    InFlight() { g_calls_in_flight.fetch_add(1); }
    ~InFlight() { g_calls_in_flight.fetch_sub(1); }
  } in_flight;
  if (fault_is("crash_run")) raise(SIGSEGV);
  if (fault_is("setsid_child") || fault_is("crash_with_child")) start_setsid_child_once();
  if (fault_is("crash_with_child")) raise(SIGSEGV);
  if (fault_is("kill_parent")) ::kill(getppid(), SIGKILL);
  if (fault_is("crash_once")) crash_if_first_run();
  if (fault_is("hang")) hang_forever();
  if (fault_is("unwritten_output") || fault_is("forged_records")) return QGATE_OK;
  if (fault_is("chatty_stdout")) {
    std::printf("chatty build: qgate_gemm_run nt=%lld\n", (long long)nt);
    std::fflush(stdout);
  }
  if (fault_is("illegal_address")) {
    if (facts.backend == QGATE_BACKEND_CUDA && qgate_fault_device_illegal_write(stream)) return QGATE_OK;
    std::abort();
  }
  if (fault_is("leak")) leak_memory(facts.backend);
  if (fault_is("memory_hog")) {
    auto* block = static_cast<volatile char*>(std::malloc(size_t(1) << 30));
    for (size_t i = 0; block && i < (size_t(1) << 30); i += 4096) block[i] = 1;  // resident, page by page
    g_last_leaked_block = const_cast<char*>(block);
  }
  if (fault_is("pool_once")) keep_pool_once(facts.backend);
  if (fault_is("snoop")) snoop_once();
  const qgate_status status = ref().gemm_run(g, x, nt, y, stream);
  if (status == QGATE_OK && fault_is("nan_output")) fill_nan(y, nt * facts.od, facts.backend, stream);
  if (status == QGATE_OK && fault_is("constant_output")) {
    if (facts.backend == QGATE_BACKEND_CUDA) std::abort();  // a CPU-only fault
    std::fill(y, y + nt * facts.od, 1.0f);
  }
  return status;
}
QGATE_EXPORT int64_t qgate_gemm_resident_bytes(const qgate_gemm* g) { return ref().gemm_resident_bytes(g); }
QGATE_EXPORT void qgate_gemm_release(qgate_gemm* g) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_gemms.erase(g);
  }
  ref().gemm_release(g);
}
}
