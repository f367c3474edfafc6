import Foundation

/// Writes a line to standard output at once (unbuffered), so a parent reading a pipe or file sees it immediately.
/// (The command line has its own; the harness keeps this copy so that it needs nothing from the executable.)
func say(_ text: String, terminator: String = "\n") {
    FileHandle.standardOutput.write(Data((text + terminator).utf8))
}

/// Plain-text tables for the command line (`framebus formats`) and the bench's reports.
package enum TextTable {
    package static func render(header: [String], rows: [[String]]) -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        func line(_ cells: [String]) -> String {
            let padded = zip(cells, widths).map { $0 + String(repeating: " ", count: $1 - $0.count) }
            return String(padded.joined(separator: "  ").reversed().drop(while: { $0 == " " }).reversed())
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }

    /// Rows without a rule: the first two columns left-aligned, the rest (numbers) right-aligned.
    package static func numeric(_ rows: [[String]]) -> String {
        let widths = (0..<rows[0].count).map { column in
            rows.map { $0.count > column ? $0[column].count : 0 }.max() ?? 0
        }
        return rows.map { row in
            row.enumerated().map { column, cell in
                column < 2
                    ? cell.padding(toLength: widths[column], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[column] - cell.count) + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
