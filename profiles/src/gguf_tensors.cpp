// GgufTensorSource: a GGUF file's tensor list, name-glob selection and bounded preads of one tensor's
// bytes. Type sizes come from the header reader's ggml table; the gated types from block_formats.h.
#include "qgate/profiles/gguf_tensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <new>
#include <utility>

namespace qgate::profiles {

namespace {

std::string shape_of(const GgufTensorEntry& t) {
  std::string s;
  for (uint32_t d = 0; d < t.n_dims && d < kGgufMaxDims; ++d) {
    if (d > 0) s += "x";
    s += std::to_string(t.ne[d]);
  }
  return s;
}

// Fills the GEMM view (or the skip reason) of an entry whose size facts are already set. The shape is
// judged before the type: an f32 norm is skipped as a 1-D tensor, an f16 matrix for its type.
void classify(GgufTensorEntry& t) {
  if (!t.size_known) {
    t.skip_reason = "ggml type id " + std::to_string(t.type) + " is not known to qgate (its block size is unknown)";
    return;
  }
  if (t.n_dims <= 1) {
    t.skip_reason = "1-D tensor (norm or bias), not a matrix";
    return;
  }
  if (t.ne[2] * t.ne[3] > 1) {  // the header reader bounds the element count, so this cannot overflow
    t.skip_reason = std::to_string(t.n_dims) + "-D tensor (" + shape_of(t) + ", stacked matrices), not one matrix";
    return;
  }
  if (!quant::is_valid_type_id(static_cast<int32_t>(t.type))) {
    t.skip_reason = "type " + t.type_name + " is not one of the quantized types qgate gates";
    return;
  }
  const auto type = static_cast<quant::WeightType>(t.type);
  const quant::TypeTraits& traits = quant::traits(type);
  // The header reader already refuses such files; kept so the entry's promise holds on its own.
  if (t.ne[0] % static_cast<uint64_t>(traits.block_elems) != 0) {
    t.skip_reason = "row length " + std::to_string(t.ne[0]) + " is not a multiple of the " + std::string(traits.name) +
                    " block of " + std::to_string(traits.block_elems);
    return;
  }
  t.weight_type = type;
  t.k = static_cast<int64_t>(t.ne[0]);
  t.od = static_cast<int64_t>(t.ne[1]);
}

std::string errno_text(int e) { return std::strerror(e); }

}  // namespace

bool gguf_glob_match(std::string_view glob, std::string_view name) {
  // Iterative wildcard match with one backtrack point: linear in practice, no recursion.
  size_t g = 0, n = 0;
  size_t star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == name[n])) {
      ++g;
      ++n;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      resume = n;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

std::vector<std::string> split_tensor_globs(std::string_view globs) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= globs.size()) {
    size_t end = globs.find(',', start);
    if (end == std::string_view::npos) end = globs.size();
    std::string_view part = globs.substr(start, end - start);
    while (!part.empty() && (part.front() == ' ' || part.front() == '\t')) part.remove_prefix(1);
    while (!part.empty() && (part.back() == ' ' || part.back() == '\t')) part.remove_suffix(1);
    if (!part.empty()) out.emplace_back(part);
    start = end + 1;
  }
  return out;
}

std::string GgufTensorEntry::describe() const {
  std::string s = name + " " + type_name + " " + shape_of(*this);
  if (gated()) {
    s += " (od=" + std::to_string(od) + " k=" + std::to_string(k) + ", " + std::to_string(bytes) + " bytes at " +
         std::to_string(data_offset) + ")";
  } else {
    s += ": skipped, " + skip_reason;
  }
  return s;
}

std::optional<GgufTensorSource> GgufTensorSource::open(const std::string& path, std::string* error,
                                                       const GgufLimits& limits) {
  auto fail = [&](const std::string& message) -> std::optional<GgufTensorSource> {
    if (error != nullptr) *error = message;
    return std::nullopt;
  };
  std::string message;
  std::optional<GgufHeader> header = read_gguf_header(path, &message, limits);
  if (!header) return fail(message);  // already names the path

  GgufTensorSource source;
  source.path_ = path;
  source.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (source.fd_ < 0) return fail(path + ": cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(source.fd_, &st) != 0) return fail(path + ": cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return fail(path + ": not a regular file");
  source.file_size_ = static_cast<uint64_t>(st.st_size);

  const GgufHeader& h = *header;
  source.tensors_.reserve(h.tensors.size());
  for (const GgufTensorInfo& info : h.tensors) {
    GgufTensorEntry& t = source.tensors_.emplace_back();
    t.name = info.name;
    t.type = info.type;
    t.type_name = ggml_type_name(info.type);
    t.n_dims = info.n_dims;
    t.ne = info.ne;
    // data_offset is the header rounded up to an alignment of at most 1 MiB, and offset a value the file
    // stored: the sum can still wrap for a hostile file.
    if (__builtin_add_overflow(h.data_offset, info.offset, &t.data_offset)) {
      return fail(path + ": tensor '" + t.name + "' has offset " + std::to_string(info.offset) +
                  ", which overflows the file's address range");
    }
    const std::optional<uint64_t> bytes = gguf_tensor_bytes(info);
    t.size_known = bytes.has_value();
    t.bytes = bytes.value_or(0);
    if (ggml_type_size(info.type) && !bytes) {
      // Known type, yet no size: a row length off the block (the reader refuses those) or an overflow.
      return fail(path + ": tensor '" + t.name + "' (" + t.type_name + ", " + shape_of(t) +
                  ") has a data size that cannot be computed");
    }
    // The header reader checks this only when the file has a data section at all; a file cut at (or
    // before) the end of its header must fail here, naming the first tensor it lacks.
    uint64_t end = 0;
    if (t.size_known && (__builtin_add_overflow(t.data_offset, t.bytes, &end) || end > source.file_size_)) {
      return fail(path + ": truncated file: tensor '" + t.name + "' (" + t.type_name + " " + shape_of(t) + ", " +
                  std::to_string(t.bytes) + " bytes) occupies bytes [" + std::to_string(t.data_offset) + ", " +
                  std::to_string(t.data_offset + t.bytes) + ") but the file has " +
                  std::to_string(source.file_size_) + " bytes");
    }
    classify(t);
  }
  source.header_ = std::move(*header);
  return source;
}

GgufTensorSource::GgufTensorSource(GgufTensorSource&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      file_size_(other.file_size_),
      header_(std::move(other.header_)),
      tensors_(std::move(other.tensors_)) {}

GgufTensorSource& GgufTensorSource::operator=(GgufTensorSource&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    file_size_ = other.file_size_;
    header_ = std::move(other.header_);
    tensors_ = std::move(other.tensors_);
  }
  return *this;
}

GgufTensorSource::~GgufTensorSource() {
  if (fd_ >= 0) ::close(fd_);
}

const GgufTensorEntry* GgufTensorSource::find(std::string_view name) const {
  for (const GgufTensorEntry& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::optional<GgufSelection> GgufTensorSource::select(std::string_view globs, std::string* error) const {
  auto fail = [&](const std::string& message) -> std::optional<GgufSelection> {
    if (error != nullptr) *error = message;
    return std::nullopt;
  };
  const std::vector<std::string> patterns = split_tensor_globs(globs);
  if (patterns.empty()) return fail(path_ + ": no tensor glob given (e.g. 'blk.0.*')");

  std::vector<bool> picked(tensors_.size(), false);
  for (const std::string& p : patterns) {
    bool any = false;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (gguf_glob_match(p, tensors_[i].name)) picked[i] = any = true;
    }
    if (!any) {
      std::string m = path_ + ": tensor glob '" + p + "' matches none of the file's " +
                      std::to_string(tensors_.size()) + " tensors";
      if (!tensors_.empty()) {
        m += " (they are named like";
        const size_t shown = std::min<size_t>(tensors_.size(), 4);
        for (size_t i = 0; i < shown; ++i) m += (i == 0 ? " '" : ", '") + tensors_[i].name + "'";
        m += tensors_.size() > shown ? ", ...)" : ")";
      }
      return fail(m);
    }
  }
  GgufSelection s;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (!picked[i]) continue;
    if (tensors_[i].gated()) {
      s.gemms.push_back(&tensors_[i]);
    } else {
      s.skipped.push_back({tensors_[i].name, tensors_[i].skip_reason});
    }
  }
  return s;
}

std::optional<std::vector<uint8_t>> GgufTensorSource::read(const GgufTensorEntry& entry, std::string* error) const {
  auto fail = [&](const std::string& message) -> std::optional<std::vector<uint8_t>> {
    if (error != nullptr) *error = path_ + ": tensor '" + entry.name + "': " + message;
    return std::nullopt;
  };
  if (fd_ < 0) return fail("the source is closed");
  const std::less<const GgufTensorEntry*> before;  // a total order, even for pointers into other arrays
  if (before(&entry, tensors_.data()) || !before(&entry, tensors_.data() + tensors_.size())) {
    return fail("not an entry of this source");
  }
  if (!entry.size_known) return fail("cannot read " + entry.type_name + ": the size of its blocks is unknown");
  // Checked at open against the size then; checked again against the size now.
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return fail("cannot stat: " + errno_text(errno));
  const auto size_now = static_cast<uint64_t>(st.st_size);
  if (entry.data_offset + entry.bytes > size_now) {
    return fail("the file is now " + std::to_string(size_now) + " bytes, too short for bytes [" +
                std::to_string(entry.data_offset) + ", " + std::to_string(entry.data_offset + entry.bytes) + ")");
  }
  std::vector<uint8_t> out;
  try {
    out.resize(static_cast<size_t>(entry.bytes));
  } catch (const std::bad_alloc&) {
    return fail("cannot allocate " + std::to_string(entry.bytes) + " bytes");
  }
  uint64_t done = 0;
  while (done < entry.bytes) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(entry.bytes - done, 1u << 30));
    const ssize_t n = ::pread(fd_, out.data() + done, chunk, static_cast<off_t>(entry.data_offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("read failed at byte " + std::to_string(entry.data_offset + done) + ": " + errno_text(errno));
    }
    if (n == 0) {
      return fail("short read: the file ended at byte " + std::to_string(entry.data_offset + done) + ", " +
                  std::to_string(entry.bytes - done) + " bytes before the tensor's end");
    }
    done += static_cast<uint64_t>(n);
  }
  return out;
}

std::optional<std::vector<uint8_t>> GgufTensorSource::read(std::string_view name, std::string* error) const {
  const GgufTensorEntry* t = find(name);
  if (t == nullptr) {
    if (error != nullptr) *error = path_ + ": no tensor named '" + std::string(name) + "'";
    return std::nullopt;
  }
  return read(*t, error);
}

std::string GgufTensorSource::describe(const GgufSelection* selection) const {
  std::string s = path_ + ": GGUF v" + std::to_string(header_.version) + ", " + std::to_string(tensors_.size()) +
                  " tensors, alignment " + std::to_string(header_.alignment) + ", data at byte " +
                  std::to_string(header_.data_offset) + ", " + std::to_string(file_size_) + " bytes\n";
  if (selection == nullptr) {
    for (const GgufTensorEntry& t : tensors_) s += "  " + t.describe() + "\n";
    return s;
  }
  s += "selected " + std::to_string(selection->gemms.size()) + " GEMM weights, " +
       std::to_string(selection->skipped.size()) + " skipped\n";
  for (const GgufTensorEntry* t : selection->gemms) s += "  " + t->describe() + "\n";
  for (const SkippedTensor& t : selection->skipped) {
    const GgufTensorEntry* e = find(t.name);
    s += "  " + (e != nullptr ? e->describe() : t.name + ": skipped, " + t.reason) + "\n";
  }
  return s;
}

}  // namespace qgate::profiles
