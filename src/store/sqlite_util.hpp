// Thin RAII helpers over the sqlite3 C API, mapping failures to genscope::Error.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace genscope::detail {

/// Throws genscope::Error for a failed sqlite3 call: "HistoryCorrupt" for SQLITE_CORRUPT /
/// SQLITE_NOTADB, "HistoryBusy" for SQLITE_BUSY/LOCKED, else "HistoryFailed".
[[noreturn]] void throw_sqlite(sqlite3* db, int rc, std::string_view what);
/// Executes SQL without results; throws on failure.
void exec(sqlite3* db, const char* sql);

/// A prepared statement; finalized on destruction.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, double value);  ///< NaN binds NULL.
  Statement& bind_null(int index);
  /// Steps once: true when a row is available, false when done; throws on error.
  bool step();
  /// Resets for re-execution with new bindings.
  void reset();
  std::string text(int column) const;
  std::int64_t int64(int column) const;
  double real(int column) const;  ///< NULL reads as NaN.

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace genscope::detail
