import Foundation
import Testing

@testable import SesameJOSE

@Suite struct JOSEValueTests {
    private func parse(_ text: String) throws -> JOSEValue { try JOSEValue.parse(Array(text.utf8)) }

    private func code(_ text: String) -> JOSEError.Code? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            return (error as? JOSEError)?.code
        }
    }

    @Test("Parses every JSON type")
    func parsesTypes() throws {
        let value = try parse(#"{"a":[1,-2.5,1e3,true,false,null,"x\u00e9\ud83d\ude00\n"],"b":{}}"#)
        #expect(value["a"]?.arrayValue?.count == 7)
        #expect(value["a"]?.arrayValue?[0] == .integer(1))
        #expect(value["a"]?.arrayValue?[1] == .number(-2.5))
        #expect(value["a"]?.arrayValue?[2] == .number(1000))
        #expect(value["a"]?.arrayValue?[6] == .string("xé😀\n"))
        #expect(value["b"] == .object([:]))
    }

    @Test(
        "ATK-15: duplicate member names are rejected at every level",
        arguments: [
            #"{"alg":"RS256","alg":"none"}"#, #"{"sub":"alice","sub":"admin"}"#,
            #"{"cnf":{"jkt":"a","jkt":"b"}}"#, #"{"events":[{"x":1,"x":2}]}"#, #"{"a":1,"\u0061":2}"#,
        ]
    )
    func rejectsDuplicates(text: String) {
        #expect(code(text) == .duplicateMember)
    }

    @Test("ATK-14: nesting deeper than the limit is rejected, without a crash")
    func rejectsDeepNesting() {
        let deep = String(repeating: "[", count: 1000) + String(repeating: "]", count: 1000)
        #expect(code(deep) == .malformedJSON)
        let ok = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        #expect(code(ok) == nil)
    }

    @Test(
        "Malformed JSON is rejected",
        arguments: [
            "", "{", "{\"a\"}", "{\"a\":1,}", "[1,]", "01", "1.", "-", "1e", "+1", "nul", "tru", "\"\u{01}\"",
            "\"\\x\"", "\"\\ud800\"", "\"\\udc00x\"", "{} {}", "'a'", "1e400", "NaN", "{\"a\":1}x",
        ]
    )
    func rejectsMalformed(text: String) {
        #expect(code(text) == .malformedJSON)
    }

    @Test("Invalid UTF-8 inside strings is rejected")
    func rejectsInvalidUTF8() {
        #expect(throws: JOSEError.self) { try JOSEValue.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JOSEError.self) { try JOSEValue.parse([0x22, 0x5C, 0x6E, 0xFF, 0x22]) }
    }

    @Test("Large integers beyond Int64 become doubles; serialization is compact and sorted")
    func numbersAndSerialization() throws {
        #expect(try parse("12345678901234567890") == .number(1.2345678901234567e19))
        let value: JOSEValue = ["b": 1, "a": ["x", true, nil], "c": "q\"\\\n\u{01}"]
        #expect(value.jsonString == #"{"a":["x",true,null],"b":1,"c":"q\"\\\n\u0001"}"#)
        #expect(try parse(value.jsonString) == value)
    }
}
