/// Text a peer sent (an ERROR's reason, a stream name, a monitor's path), made safe to log and print.
///
/// The one rule both sides use, the stricter of the two the publisher and the subscriber once had: a backslash
/// becomes `\\` (so an escape in the output cannot be forged by the peer), and every scalar whose general category is
/// control (C0, DEL, C1), format (bidirectional overrides, zero-width characters), line or paragraph separator,
/// private use, surrogate or unassigned is written as Swift writes it escaped (`\n`, `\t`, `\u{1B}`, `\u{202E}`),
/// so nothing a peer sends can move a terminal's cursor, change its title or reorder what is shown around it.
enum PeerText {
    static func escaped(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            if scalar == "\\" {
                result += "\\\\"
                continue
            }
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate, .unassigned:
                result += scalar.escaped(asASCII: true)
            default:
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }
}

extension String {
    /// The text escaped by ``PeerText/escaped(_:)``, for printing text a peer sent.
    package var escapingControlCharacters: String { PeerText.escaped(self) }
}
