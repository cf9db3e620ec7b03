#include "engine/safetensors.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "engine/engine_errc.hpp"
#include "engine/mapped_file.hpp"

namespace tessera::engine {

namespace {

using nlohmann::json;

/// The largest header we parse; the Hugging Face reader has the same limit.
constexpr uint64_t max_header_bytes = 100'000'000;

/// The dtype names safetensors defines that this engine does not load.
bool is_known_safetensors_dtype(std::string_view n) {
  static constexpr std::string_view known[] = {"BOOL", "U8",  "I8",  "I16",     "U16",
                                               "I32",  "U32", "I64", "U64",     "F64",
                                               "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4",
                                               "F6_E2M3", "F6_E3M2", "C64"};
  return std::find(std::begin(known), std::end(known), n) != std::end(known);
}

std::optional<dtype> safetensors_dtype(std::string_view n) {
  if (n == "F32")
    return dtype::f32;
  if (n == "F16")
    return dtype::f16;
  if (n == "BF16")
    return dtype::bf16;
  return std::nullopt;
}

/// A non-negative JSON integer as uint64, or nullopt.
std::optional<uint64_t> as_count(const json& j) {
  if (j.is_number_unsigned())
    return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0)
    return static_cast<uint64_t>(j.get<int64_t>());
  return std::nullopt;
}

struct entry {
  tensor_view view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

} // namespace

int64_t tensor_view::numel() const {
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

struct safetensors_file::impl {
  std::filesystem::path path;
  mapped_file map;
  std::vector<tensor_view> tensors;
  std::map<std::string, size_t, std::less<>> index;
  std::map<std::string, std::string> metadata;

  [[nodiscard]] caf::error fail(engine_errc code, const std::string& what) const {
    return make_engine_error(code, path.string() + ": " + what);
  }

  [[nodiscard]] caf::error tensor_fail(engine_errc code, const std::string& name,
                                       const std::string& what) const {
    return fail(code, "tensor '" + name + "' " + what);
  }

  [[nodiscard]] caf::error parse();
  [[nodiscard]] caf::error parse_metadata(const json& j);
  [[nodiscard]] caf::expected<entry> parse_entry(const std::string& name, const json& j,
                                                 uint64_t data_size) const;
};

caf::error safetensors_file::impl::parse() {
  auto bytes = map.bytes();
  if (bytes.size() < 8)
    return fail(engine_errc::bad_weights,
                "file is " + std::to_string(bytes.size()) +
                  " bytes, too short for the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = header_len << 8 | static_cast<uint8_t>(bytes[static_cast<size_t>(i)]);
  const uint64_t after_len = bytes.size() - 8;
  if (header_len > after_len)
    return fail(engine_errc::bad_weights,
                "header length " + std::to_string(header_len) + " runs past the end of the " +
                  std::to_string(bytes.size()) + "-byte file (truncated?)");
  if (header_len > max_header_bytes)
    return fail(engine_errc::bad_weights, "header length " + std::to_string(header_len) +
                                            " exceeds the limit of " +
                                            std::to_string(max_header_bytes) + " bytes");
  const auto* header = reinterpret_cast<const char*>(bytes.data() + 8);
  json doc;
  try {
    doc = json::parse(header, header + header_len);
  } catch (const json::parse_error& e) {
    return fail(engine_errc::bad_weights, std::string{"header is not valid JSON: "} + e.what());
  }
  if (!doc.is_object())
    return fail(engine_errc::bad_weights,
                std::string{"header is not a JSON object but "} + doc.type_name());

  const uint64_t data_size = after_len - header_len;
  const std::byte* data = bytes.data() + 8 + header_len;
  std::vector<entry> entries;
  entries.reserve(doc.size());
  for (auto& [name, value] : doc.items()) {
    if (name == "__metadata__") {
      if (auto err = parse_metadata(value))
        return err;
      continue;
    }
    auto e = parse_entry(name, value, data_size);
    if (!e)
      return e.error();
    e->view.data = data + e->begin;
    entries.push_back(std::move(*e));
  }

  // File order; an empty tensor overlaps nothing, so only sized ones count.
  std::sort(entries.begin(), entries.end(), [](const entry& a, const entry& b) {
    return std::tie(a.begin, a.end, a.view.name) < std::tie(b.begin, b.end, b.view.name);
  });
  const entry* furthest = nullptr;
  for (auto& e : entries) {
    if (e.begin == e.end)
      continue;
    if (furthest != nullptr && e.begin < furthest->end)
      return tensor_fail(engine_errc::bad_weights, e.view.name,
                         "(bytes " + std::to_string(e.begin) + ".." + std::to_string(e.end) +
                           ") overlaps tensor '" + furthest->view.name + "' (bytes " +
                           std::to_string(furthest->begin) + ".." +
                           std::to_string(furthest->end) + ")");
    if (furthest == nullptr || e.end > furthest->end)
      furthest = &e;
  }
  tensors.reserve(entries.size());
  for (auto& e : entries) {
    index.emplace(e.view.name, tensors.size());
    tensors.push_back(std::move(e.view));
  }
  return {};
}

caf::error safetensors_file::impl::parse_metadata(const json& j) {
  if (!j.is_object())
    return fail(engine_errc::bad_weights, "__metadata__ is not a JSON object");
  for (auto& [key, value] : j.items()) {
    if (!value.is_string())
      return fail(engine_errc::bad_weights,
                  "__metadata__ value '" + key + "' is not a string");
    metadata.emplace(key, value.get<std::string>());
  }
  return {};
}

caf::expected<entry> safetensors_file::impl::parse_entry(const std::string& name,
                                                         const json& j,
                                                         uint64_t data_size) const {
  if (!j.is_object())
    return tensor_fail(engine_errc::bad_weights, name, "is not a JSON object");
  auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string())
    return tensor_fail(engine_errc::bad_weights, name, "has no dtype string");
  auto dt_name = dt->get<std::string>();
  auto type = safetensors_dtype(dt_name);
  if (!type)
    return tensor_fail(engine_errc::unsupported, name,
                       "has " +
                         std::string{is_known_safetensors_dtype(dt_name) ? "" : "unknown "} +
                         "dtype '" + dt_name + "', not supported (supported: F32, F16, BF16)");

  auto sh = j.find("shape");
  if (sh == j.end() || !sh->is_array())
    return tensor_fail(engine_errc::bad_weights, name, "has no shape list");
  entry e;
  e.view.name = name;
  e.view.type = *type;
  uint64_t numel = 1;
  bool overflow = false;
  for (auto& d : *sh) {
    auto dim = as_count(d);
    if (!dim)
      return tensor_fail(engine_errc::bad_weights, name,
                         "has dimension " + d.dump() +
                           " in its shape; dimensions must be non-negative integers");
    if (*dim > static_cast<uint64_t>(INT64_MAX))
      return tensor_fail(engine_errc::bad_weights, name,
                         "has dimension " + d.dump() + ", too large");
    e.view.shape.push_back(static_cast<int64_t>(*dim));
    overflow = overflow || __builtin_mul_overflow(numel, *dim, &numel);
  }
  uint64_t size = 0;
  overflow = overflow || __builtin_mul_overflow(numel, uint64_t{dtype_size(*type)}, &size);
  if (overflow || numel > static_cast<uint64_t>(INT64_MAX))
    return tensor_fail(engine_errc::bad_weights, name, "has a shape whose size overflows");

  auto off = j.find("data_offsets");
  if (off == j.end() || !off->is_array() || off->size() != 2 || !as_count((*off)[0]) ||
      !as_count((*off)[1]))
    return tensor_fail(engine_errc::bad_weights, name,
                       "has no data_offsets pair of non-negative integers");
  e.begin = *as_count((*off)[0]);
  e.end = *as_count((*off)[1]);
  if (e.begin > e.end || e.end > data_size)
    return tensor_fail(engine_errc::bad_weights, name,
                       "has data_offsets [" + std::to_string(e.begin) + ", " +
                         std::to_string(e.end) + "] outside the " + std::to_string(data_size) +
                         "-byte data section");
  if (e.end - e.begin != size)
    return tensor_fail(engine_errc::bad_weights, name,
                       "has " + std::to_string(e.end - e.begin) + " bytes but its shape " +
                         sh->dump() + " and dtype " + dt_name + " need " +
                         std::to_string(size));
  e.view.size_bytes = static_cast<size_t>(size);
  return e;
}

caf::expected<safetensors_file> safetensors_file::open(const std::filesystem::path& path) {
  auto p = std::make_unique<impl>();
  p->path = path;
  auto map = mapped_file::open(path);
  if (!map)
    return map.error();
  p->map = std::move(*map);
  try {
    if (auto err = p->parse())
      return err;
  } catch (const json::exception& e) { // defensive: types are checked before use
    return p->fail(engine_errc::bad_weights, std::string{"malformed header: "} + e.what());
  }
  return safetensors_file{std::move(p)};
}

safetensors_file::safetensors_file(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
safetensors_file::safetensors_file(safetensors_file&&) noexcept = default;
safetensors_file& safetensors_file::operator=(safetensors_file&&) noexcept = default;
safetensors_file::~safetensors_file() = default;

const std::vector<tensor_view>& safetensors_file::tensors() const { return impl_->tensors; }

const tensor_view* safetensors_file::find(std::string_view name) const {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->tensors[it->second];
}

const std::map<std::string, std::string>& safetensors_file::metadata() const {
  return impl_->metadata;
}

const std::filesystem::path& safetensors_file::path() const { return impl_->path; }

} // namespace tessera::engine
