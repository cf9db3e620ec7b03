// Writes the frame fuzzer's seed corpus: every sample message as a raw
// frame (mode byte 0), as a stream of all of them (mode byte 2, fed in
// 2-byte chunks), and as a bare body (mode byte 1 + type). Built with the
// main (gcc) build; the frame format does not depend on the compiler.
//
// Usage: make_corpus DIR

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "transport/wire/codec.hpp"
#include "transport/wire/frame.hpp"
#include "../wire_samples.hpp"

namespace w = tessera::transport::wire;

namespace {

void write(const std::filesystem::path& path, uint8_t mode, const std::vector<std::byte>& payload) {
  std::ofstream out(path, std::ios::binary);
  out.put(static_cast<char>(mode));
  out.write(reinterpret_cast<const char*>(payload.data()), static_cast<std::streamsize>(payload.size()));
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  std::vector<std::byte> stream;
  int i = 0;
  for (const auto& m : w::test::all_samples()) {
    auto frame = w::encode(m);
    if (!frame) {
      std::fprintf(stderr, "make_corpus: sample %d does not encode\n", i);
      return 1;
    }
    write(dir / ("frame-" + std::to_string(i)), 0, *frame);
    std::vector<std::byte> body;
    body.push_back(std::byte(static_cast<uint8_t>(w::type_of(m))));
    body.insert(body.end(), frame->begin() + w::frame_header_bytes, frame->end());
    write(dir / ("body-" + std::to_string(i)), 1, body);
    stream.insert(stream.end(), frame->begin(), frame->end());
    ++i;
  }
  write(dir / "stream", 2, stream);
  return 0;
}
