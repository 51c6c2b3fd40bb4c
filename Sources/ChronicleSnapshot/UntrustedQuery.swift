import CSQLite
import GRDB

/// What a connection needs to run SQL a user typed (`chronicle query`):
/// limits set on the connection, and where a result column comes from.
package enum UntrustedQuery {
    /// Limits the connection before it prepares a user's statement: no
    /// ATTACH (it could create a file beside the snapshot), and no value
    /// longer than `maxValueBytes` (so `zeroblob(1e9)` fails at once).
    package static func limit(_ db: Database, maxValueBytes: Int) {
        sqlite3_limit(db.sqliteConnection, SQLITE_LIMIT_ATTACHED, 0)
        sqlite3_limit(db.sqliteConnection, SQLITE_LIMIT_LENGTH, Int32(clamping: maxValueBytes))
    }

    /// The table and column that result column `index` of `statement`
    /// comes straight from, as SQLite names them; nil for an expression.
    package static func origin(of statement: Statement, column index: Int) -> (table: String, column: String)? {
        guard let table = sqlite3_column_table_name(statement.sqliteStatement, Int32(index)),
              let column = sqlite3_column_origin_name(statement.sqliteStatement, Int32(index)) else { return nil }
        return (String(cString: table), String(cString: column))
    }
}
