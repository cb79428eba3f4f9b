// RAII helpers over the sqlite3 C API.
#include "store/sqlite_util.hpp"

#include <cmath>

#include "genscope/error.hpp"

namespace genscope::detail {

void throw_sqlite(sqlite3* db, int rc, std::string_view what) {
  const int primary = rc & 0xff;
  std::string message = std::string(what) + ": " + sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_errmsg(db) != nullptr) message += std::string(" (") + sqlite3_errmsg(db) + ")";
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) throw Error("HistoryCorrupt", message);
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw Error("HistoryBusy", message);
  throw Error("HistoryFailed", message);
}

void exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    sqlite3_free(error);
    throw_sqlite(db, rc, sql);
  }
}

Statement::Statement(sqlite3* db, const char* sql) : db_(db) {
  const int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
  if (rc != SQLITE_OK) throw_sqlite(db, rc, sql);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::string_view text) {
  // A null data pointer would bind SQL NULL: empty strings must stay empty strings.
  const char* data = text.data() != nullptr ? text.data() : "";
  const int rc = sqlite3_bind_text(stmt_, index, data, static_cast<int>(text.size()),
                                   SQLITE_TRANSIENT);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
  return *this;
}

Statement& Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
  return *this;
}

Statement& Statement::bind(int index, double value) {
  const int rc = std::isnan(value) ? sqlite3_bind_null(stmt_, index)
                                   : sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
  return *this;
}

Statement& Statement::bind_null(int index) {
  const int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK) throw_sqlite(db_, rc, "bind");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw_sqlite(db_, rc, sqlite3_sql(stmt_));
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int column) const {
  const auto* p = sqlite3_column_text(stmt_, column);
  return p == nullptr ? std::string()
                      : std::string(reinterpret_cast<const char*>(p),
                                    static_cast<std::size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::int64_t Statement::int64(int column) const { return sqlite3_column_int64(stmt_, column); }

double Statement::real(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_NULL) return std::nan("");
  return sqlite3_column_double(stmt_, column);
}

}  // namespace genscope::detail
