// A main() for the fuzz target without libFuzzer: runs every file under the
// folders given as arguments through LLVMFuzzerTestOneInput once. With the
// seed corpus it is //tests/fuzz:wire_fuzz_corpus_test, which any build
// (gcc, --config=asan, --config=ubsan) can run; a broken property aborts.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR...\n", argv[0]);
    return 2;
  }
  int inputs = 0;
  for (int i = 1; i < argc; ++i) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::recursive_directory_iterator(
             argv[i], std::filesystem::directory_options::follow_directory_symlink)) {
      if (!e.is_directory()) files.push_back(e.path());
    }
    for (const std::filesystem::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "cannot read %s\n", f.c_str());
        return 1;
      }
      std::printf("%s (%zu bytes)\n", f.c_str(), bytes.size());
      std::fflush(stdout);  // the last line names the input if it aborts
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++inputs;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "no inputs found\n");
    return 1;
  }
  std::printf("%d inputs ran\n", inputs);
  return 0;
}
