// write_file_atomic: the public face of detail::AtomicFile (temporary file, fsync, rename).
#include "formats/atomic_file.hpp"
#include "genscope/run_json.hpp"

namespace genscope {

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  detail::AtomicFile file(path);
  file.write(content);
  file.commit();
}

}  // namespace genscope
