import Foundation

/// One row of a chart: Sesame's rate beside the reference measured in the same run.
struct ChartRow {
    let label: String
    let sesame: Double
    let reference: Double
    let referenceName: String
}

/// Writes a horizontal bar chart (SVG) of `rows`: per row, Sesame's operations per second and the reference's, each
/// bar scaled to the larger of the two, with the ratio printed — the figures `report` printed, never others.
func writeChart(title: String, subtitle: String, rows: [ChartRow], to path: String) throws {
    let width = 760
    let rowHeight = 64
    let top = 70
    let labelWidth = 230
    let barSpace = width - labelWidth - 150
    let height = top + rows.count * rowHeight + 30
    func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
    func rate(_ value: Double) -> String {
        value >= 1_000_000
            ? String(format: "%.2f M/s", value / 1_000_000)
            : value >= 1000 ? String(format: "%.1f k/s", value / 1000) : String(format: "%.0f /s", value)
    }
    var svg = [
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" "
            + "font-family=\"-apple-system, Helvetica, Arial, sans-serif\" font-size=\"12\">",
        "<title>\(escape(title))</title>",
        "<rect width=\"\(width)\" height=\"\(height)\" fill=\"#ffffff\"/>",
        "<text x=\"16\" y=\"24\" font-size=\"15\" font-weight=\"bold\">\(escape(title))</text>",
        "<text x=\"16\" y=\"44\" fill=\"#555\">\(escape(subtitle))</text>",
    ]
    for (index, row) in rows.enumerated() {
        let y = top + index * rowHeight
        let largest = max(row.sesame, row.reference, 1)
        let sesameWidth = max(2, Int(Double(barSpace) * row.sesame / largest))
        let referenceWidth = max(2, Int(Double(barSpace) * row.reference / largest))
        svg.append("<text x=\"16\" y=\"\(y + 16)\" font-weight=\"bold\">\(escape(row.label))</text>")
        svg.append(
            "<text x=\"16\" y=\"\(y + 34)\" fill=\"#555\">ratio \(String(format: "%.2f", row.sesame / max(row.reference, 1e-9)))</text>"
        )
        svg.append("<rect x=\"\(labelWidth)\" y=\"\(y + 4)\" width=\"\(sesameWidth)\" height=\"18\" fill=\"#3b6fd8\"/>")
        svg.append("<text x=\"\(labelWidth + sesameWidth + 6)\" y=\"\(y + 18)\">Sesame \(rate(row.sesame))</text>")
        svg.append(
            "<rect x=\"\(labelWidth)\" y=\"\(y + 26)\" width=\"\(referenceWidth)\" height=\"18\" fill=\"#9aa5b1\"/>")
        svg.append(
            "<text x=\"\(labelWidth + referenceWidth + 6)\" y=\"\(y + 40)\">\(escape(row.referenceName)) \(rate(row.reference))</text>"
        )
    }
    svg.append("</svg>")
    try Data((svg.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
    print("# chart written to \(path)")
}
