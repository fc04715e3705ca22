// The safetensors writer (atomic: temporary file, fsync, rename) and the validating reader.
#include "checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ringmaster {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

namespace {

constexpr const char* kMetadataKey = "__metadata__";

// ---------------------------------------------------------------------------------------------
// Writing

// An fd for path + ".tmp" that is closed and unlinked unless commit() renamed it into place.
class AtomicFile {
 public:
  AtomicFile(std::string path, mode_t mode) : path_(std::move(path)), tmp_path_(path_ + ".tmp") {
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) fail("cannot create");
    // `mode` whatever the umask (which can only take bits away, the owner's too).
    if (::fchmod(fd_, mode) != 0) fail("cannot set the mode of");
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_path_.c_str());
  }

  void write(const void* data, size_t size) {
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t written = ::write(fd_, p, size);
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("cannot write");
      }
      p += written;
      size -= static_cast<size_t>(written);
    }
  }

  void commit() {
    if (::fsync(fd_) != 0) fail("cannot fsync");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("cannot close");
    if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
      RM_THROW(kIo,
               fmt::format("cannot rename {} to {}: {}", tmp_path_, path_, std::strerror(errno)));
    }
    committed_ = true;
    // Make the rename itself durable; some file systems refuse fsync on directories, which only
    // weakens durability, so a failure here is not an error.
    const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
    const int dir_fd =
        ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      (void)::fsync(dir_fd);
      ::close(dir_fd);
    }
  }

 private:
  [[noreturn]] void fail(const char* what) {
    RM_THROW(kIo, fmt::format("{} {}: {}", what, tmp_path_, std::strerror(errno)));
  }

  std::string path_, tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

// ---------------------------------------------------------------------------------------------
// Reading

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// One tensor entry of a header, checked.
struct Entry {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};

// The first duplicate key the parser saw.
struct DuplicateKey {
  std::string key;
  bool top_level = false;
  std::string entry;  // the top-level key it is under, when not top-level itself
};

std::string jsonTypeName(const nlohmann::json& value) {
  return value.type_name();
}

Entry parseEntry(const std::string& path, const std::string& name, const nlohmann::json& info,
                 uint64_t data_size) {
  auto bad = [&](const std::string& problem) {
    RM_THROW(kFormat, fmt::format("{}: tensor '{}': {}", path, name, problem));
  };
  if (!info.is_object()) bad(fmt::format("expected an object, found {}", jsonTypeName(info)));
  Entry entry;
  entry.name = name;

  auto dtype = info.find("dtype");
  if (dtype == info.end()) bad("no \"dtype\"");
  if (!dtype->is_string()) bad(fmt::format("\"dtype\" is {}, not a string", jsonTypeName(*dtype)));
  if (!parseDTypeName(dtype->get<std::string>(), &entry.dtype)) {
    bad(fmt::format("unknown dtype \"{}\" (supported: F32, BF16, F16, F64, I32, I64, U8)",
                    dtype->get<std::string>()));
  }

  auto shape = info.find("shape");
  if (shape == info.end()) bad("no \"shape\"");
  if (!shape->is_array()) bad(fmt::format("\"shape\" is {}, not an array", jsonTypeName(*shape)));
  unsigned __int128 numel = 1;
  bool huge = false;
  for (const auto& dim : *shape) {
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      bad(fmt::format("\"shape\" {} holds {}, not a non-negative integer", shape->dump(),
                      dim.dump()));
    }
    const uint64_t d = dim.get<uint64_t>();
    entry.shape.push_back(static_cast<int64_t>(d));
    numel *= d;
    if (numel > (static_cast<unsigned __int128>(1) << 64)) {
      huge = true;
      numel = static_cast<unsigned __int128>(1) << 64;  // saturate; a later 0 still zeroes it
    }
    if (d == 0) numel = 0, huge = false;
  }

  auto offsets = info.find("data_offsets");
  if (offsets == info.end()) bad("no \"data_offsets\"");
  if (!offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    bad(fmt::format("\"data_offsets\" {} is not a pair of non-negative integers [begin, end]",
                    offsets->dump()));
  }
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  if (entry.begin > entry.end) {
    bad(fmt::format("data_offsets [{}, {}] end before they begin", entry.begin, entry.end));
  }
  const unsigned __int128 bytes = numel * dtypeSize(entry.dtype);
  if (huge || bytes != entry.end - entry.begin) {
    bad(fmt::format(
        "shape {} of {} needs {} bytes, but data_offsets [{}, {}] span {}", shape->dump(),
        dtypeName(entry.dtype),
        huge ? std::string("more than 2^64") : fmt::format("{}", static_cast<uint64_t>(bytes)),
        entry.begin, entry.end, entry.end - entry.begin));
  }
  if (entry.end > data_size) {
    bad(fmt::format("data_offsets [{}, {}] run past the end of the data region ({} bytes)",
                    entry.begin, entry.end, data_size));
  }
  return entry;
}

}  // namespace

// -----------------------------------------------------------------------------------------------
// saveSafetensors

void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata, unsigned mode) {
  std::set<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    RM_CHECK_ARG(name != kMetadataKey,
                 fmt::format("{}: \"{}\" is reserved and cannot name a tensor", path, name));
    RM_CHECK_ARG(names.insert(name).second,
                 fmt::format("{}: two tensors are named '{}'", path, name));
    RM_CHECK_ARG(tensor.defined(), fmt::format("{}: tensor '{}' is undefined", path, name));
  }

  // The reference writer's layout: largest element size first, then by name.
  std::vector<size_t> order(tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const size_t size_a = dtypeSize(tensors[a].second.dtype());
    const size_t size_b = dtypeSize(tensors[b].second.dtype());
    if (size_a != size_b) return size_a > size_b;
    return tensors[a].first < tensors[b].first;
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (size_t i : order) {
    const Tensor& tensor = tensors[i].second;
    header[tensors[i].first] = {{"dtype", dtypeName(tensor.dtype())},
                                {"shape", tensor.shape()},
                                {"data_offsets", {offset, offset + tensor.nbytes()}}};
    offset += tensor.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    RM_THROW(kInvalidArgument,
             fmt::format("{}: a tensor name or metadata string is not valid UTF-8 ({})", path,
                         e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_length = text.size();

  AtomicFile file(path, static_cast<mode_t>(mode));
  file.write(&header_length, sizeof header_length);
  file.write(text.data(), text.size());
  for (size_t i : order) {
    const Tensor& tensor = tensors[i].second;
    if (tensor.nbytes() == 0) continue;
    const Tensor host = tensor.device().isCuda() ? tensor.to(Device::cpu()) : tensor;
    file.write(host.raw(), host.nbytes());
  }
  file.commit();
}

// -----------------------------------------------------------------------------------------------
// loadSafetensors

namespace {

// A file open for reading, with its size when opened; a read that comes up short throws.
struct ReadFile {
  std::string path;
  std::unique_ptr<std::FILE, FileCloser> file;
  uint64_t size = 0;

  void readExactly(void* out, size_t bytes) {
    if (bytes > 0 && std::fread(out, 1, bytes, file.get()) != bytes) {
      RM_THROW(kIo, fmt::format("cannot read {}: {}", path,
                                std::ferror(file.get()) ? std::strerror(errno)
                                                        : "the file shrank while being read"));
    }
  }
};

ReadFile openForReading(const std::string& path) {
  ReadFile read{.path = path, .file = {std::fopen(path.c_str(), "rb"), FileCloser{}}};
  if (!read.file) RM_THROW(kIo, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  struct stat info {};
  if (::fstat(::fileno(read.file.get()), &info) != 0) {
    RM_THROW(kIo, fmt::format("cannot stat {}: {}", path, std::strerror(errno)));
  }
  if (S_ISDIR(info.st_mode)) RM_THROW(kIo, fmt::format("cannot read {}: is a directory", path));
  read.size = static_cast<uint64_t>(info.st_size);
  return read;
}

// The header's JSON text: the 8-byte length, checked against the limit and the file's size, then
// that many bytes, which must open a JSON object.
std::string readHeaderText(ReadFile& file) {
  const std::string& path = file.path;
  if (file.size == 0) {
    RM_THROW(kFormat, fmt::format("{}: empty file, expected a safetensors file", path));
  }
  if (file.size < 8) {
    RM_THROW(kFormat, fmt::format("{}: truncated: {} bytes is too short for the 8-byte header "
                                  "length",
                                  path, file.size));
  }
  uint64_t header_length = 0;
  file.readExactly(&header_length, sizeof header_length);
  if (header_length > kSafetensorsMaxHeaderBytes) {
    RM_THROW(kFormat, fmt::format("{}: header length {} exceeds the limit of {} bytes (is this a "
                                  "safetensors file?)",
                                  path, header_length, kSafetensorsMaxHeaderBytes));
  }
  if (header_length > file.size - 8) {
    RM_THROW(kFormat, fmt::format("{}: truncated: header length {} runs past the end of the file "
                                  "({} bytes after the 8-byte length)",
                                  path, header_length, file.size - 8));
  }
  std::string text(header_length, '\0');
  file.readExactly(text.data(), text.size());
  if (text.empty() || text[0] != '{') {
    RM_THROW(kFormat, fmt::format("{}: the header does not start with '{{' (a JSON object)", path));
  }
  return text;
}

// The header parsed: a JSON object, no deeper than a header needs, with no key twice in one object
// (nlohmann's parser would keep the last silently; the first duplicate is named).
nlohmann::json parseHeader(const std::string& path, const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  std::optional<DuplicateKey> duplicate;
  std::string top_key;
  auto callback = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    // A header is 3 levels deep ({"name": {"shape": [...]}}): a deeper one is refused before a
    // document of millions of levels is built from a header within its byte limit.
    constexpr int kMaxHeaderDepth = 8;
    if (depth > kMaxHeaderDepth) {
      RM_THROW(kFormat,
               fmt::format("{}: the header nests deeper than {} levels", path, kMaxHeaderDepth));
    }
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty()) {
      const std::string key = parsed.get<std::string>();
      if (depth == 1) top_key = key;
      if (!open_objects.back().insert(key).second && !duplicate) {
        duplicate = DuplicateKey{key, depth == 1, top_key};
      }
    }
    return true;
  };
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text, callback);
  } catch (const nlohmann::json::exception& e) {
    RM_THROW(kFormat, fmt::format("{}: the header is not valid JSON: {}", path, e.what()));
  }
  if (duplicate) {
    if (duplicate->top_level) {
      RM_THROW(kFormat, fmt::format("{}: the header names '{}' twice", path, duplicate->key));
    }
    RM_THROW(kFormat, fmt::format("{}: key \"{}\" appears twice in the header entry '{}'", path,
                                  duplicate->key, duplicate->entry));
  }
  if (!header.is_object()) {
    RM_THROW(kFormat,
             fmt::format("{}: the header is {}, not a JSON object", path, jsonTypeName(header)));
  }
  return header;
}

// The "__metadata__" entry: an object of strings.
std::map<std::string, std::string> parseMetadata(const std::string& path,
                                                 const nlohmann::json& value) {
  if (!value.is_object()) {
    RM_THROW(kFormat, fmt::format("{}: \"__metadata__\" is {}, not an object of strings", path,
                                  jsonTypeName(value)));
  }
  std::map<std::string, std::string> metadata;
  for (const auto& [meta_key, meta_value] : value.items()) {
    if (!meta_value.is_string()) {
      RM_THROW(kFormat, fmt::format("{}: \"__metadata__\" entry '{}' is {}, not a string", path,
                                    meta_key, jsonTypeName(meta_value)));
    }
    metadata[meta_key] = meta_value.get<std::string>();
  }
  return metadata;
}

// Sorts the entries into file order and checks that they tile the data region exactly: no
// overlap, no gap, nothing after the last.
void sortAndCheckTiling(const std::string& path, std::vector<Entry>& entries, uint64_t data_size) {
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin < covered) {
      RM_THROW(kFormat, fmt::format("{}: tensors '{}' [{}, {}] and '{}' [{}, {}] overlap", path,
                                    previous->name, previous->begin, previous->end, entry.name,
                                    entry.begin, entry.end));
    }
    if (entry.begin > covered) {
      RM_THROW(kFormat, fmt::format("{}: data bytes [{}, {}) before tensor '{}' belong to no "
                                    "tensor",
                                    path, covered, entry.begin, entry.name));
    }
    covered = entry.end;
    previous = &entry;
  }
  if (covered != data_size) {
    RM_THROW(kFormat, fmt::format("{}: data bytes [{}, {}) at the end of the file belong to no "
                                  "tensor",
                                  path, covered, data_size));
  }
}

}  // namespace

SafetensorsFile loadSafetensors(const std::string& path) {
  ReadFile file = openForReading(path);
  const std::string header_text = readHeaderText(file);
  const nlohmann::json header = parseHeader(path, header_text);
  const uint64_t data_start = 8 + header_text.size();
  const uint64_t data_size = file.size - data_start;
  SafetensorsFile result;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey)
      result.metadata = parseMetadata(path, value);
    else
      entries.push_back(parseEntry(path, key, value, data_size));
  }
  sortAndCheckTiling(path, entries, data_size);
  // Entries are in file order now, and the data follows the header directly.
  for (const Entry& entry : entries) {
    Tensor tensor = Tensor::empty(entry.shape, entry.dtype);
    file.readExactly(tensor.raw(), tensor.nbytes());
    result.tensors.emplace(entry.name, std::move(tensor));
  }
  return result;
}

}  // namespace ringmaster
