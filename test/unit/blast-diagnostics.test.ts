import { describe, expect, it } from "vitest";
import { userFacingBlastError } from "../../shared/blast/blast-diagnostics.js";

const INTERNALS = /\.cpp|\.hpp|ncbidiag|line \d+|Exception::|ncbi::|\/home\/|\/build\//;

describe("BLAST failures as users read them", () => {
  it("drops the toolkit's source paths, line numbers and exception classes, keeping what went wrong", () => {
    const raw =
      'shard b0 failed after 3 attempt(s): blastn exited with code 3: Error: NCBI C++ Exception: T0 "/home/coremake/release_build/build/PrepareRelease_Linux64/c++/src/corelib/ncbistr.cpp", line 5212: Error: (CStringException::eConvert) ncbi::CUtf8::x_GetValidSymbolCount() - at position 5: Cannot convert string to UTF8 (m_Pos = 5)';
    const shown = userFacingBlastError(raw);
    expect(shown).not.toMatch(INTERNALS);
    expect(shown).toContain("shard b0 failed after 3 attempt(s): blastn exited with code 3");
    expect(shown).toContain("Cannot convert string to UTF8");
    expect(shown).toContain("non-ASCII character");
  });

  it("drops a header file named with its line, and host paths", () => {
    const shown = userFacingBlastError(
      "Error: /opt/ncbi/include/corelib/ncbidiag.hpp(1234): out of memory while reading /var/lib/blastplane/work/abc/db.00.nsq",
    );
    expect(shown).not.toMatch(INTERNALS);
    expect(shown).not.toContain("/var/lib");
    expect(shown).toContain("out of memory while reading <path>");
  });

  it("keeps a plain message as it is", () => {
    expect(userFacingBlastError("BLAST query/options error: Entrez Query is not supported")).toBe(
      "BLAST query/options error: Entrez Query is not supported",
    );
    expect(userFacingBlastError("shard b1 failed after 1 attempt(s): the node ran out of memory")).toBe(
      "shard b1 failed after 1 attempt(s): the node ran out of memory",
    );
  });

  it("never answers an empty message", () => {
    expect(userFacingBlastError('T0 "/src/a.cpp", line 3: ')).toBe("BLAST failed; see the service log for details");
  });
});
