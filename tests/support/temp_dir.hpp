#pragma once
/// @file
/// A temporary directory removed when the object dies.

#include <filesystem>
#include <string_view>

namespace tessera::test {

/// Creates a fresh directory under the system temp dir; removes it (and
/// everything in it) on destruction.
class temp_dir {
public:
  explicit temp_dir(std::string_view prefix = "tessera-test");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

} // namespace tessera::test
