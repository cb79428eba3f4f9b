// The ordered schema migrations of the history database.
#pragma once

#include <sqlite3.h>

namespace genscope::detail {

/// Applies migrations (current, target] inside the caller's transaction and sets
/// PRAGMA user_version. Migration i turns schema version i-1 into version i.
void migrate(sqlite3* db, int current, int target);

}  // namespace genscope::detail
