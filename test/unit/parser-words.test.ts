import { describe, expect, it } from "vitest";
import { parserWords } from "../../src/run/parser-words";
import { SentSecrets } from "../../src/run/sent-secrets";

/**
 * The parser's words about a runner's line quote a window of it around where it stopped, cut from the line: a secret
 * running past either end of the window, or all around it, is left out there, as is the character it names once
 * anything in the window was a secret. Words quoting nothing of the line pass as they are.
 */
function wordsFor(line: string, ...secrets: string[]): string {
  const sent = new SentSecrets("run-token-never-in-these-lines");
  sent.add(() => secrets);
  try {
    JSON.parse(line);
  } catch (err) {
    return parserWords(err, sent.scrub);
  }
  throw new Error("the line parsed");
}

describe("the parser's words about a line", () => {
  it("quote the window around where it stopped, whole when no secret is in it", () => {
    expect(wordsFor('["KEPTLONGabcdefg", NaN, 1, 2, 3, 4, 5]', "SECRETLONG12345")).toBe(`Unexpected token 'N', ..."abcdefg", NaN, 1, 2,"... is not valid JSON`);
  });

  it("leave out the end of a secret that begins before the window", () => {
    expect(wordsFor('["SECRETLONG12345", NaN, 1, 2, 3, 4, 5]', "SECRETLONG12345")).toBe(`Unexpected token, ..."", NaN, 1, 2,"... is not valid JSON`);
  });

  it("leave out the start of a secret that runs past the window", () => {
    expect(wordsFor("[1, 2, NaN, SECRETLONG12345]", "SECRETLONG12345")).toBe(`Unexpected token, "[1, 2, NaN, "... is not valid JSON`);
  });

  it("leave out a window that lies inside a secret", () => {
    expect(wordsFor("[0,0,0,0,0,0,x,x,x,x,x,x,x,x]", "0,0,0,0,0,0,x,x,x,x,x,x,x,x")).toBe(`Unexpected token, ...""... is not valid JSON`);
  });

  it("pass words that quote nothing of the line, and say no more than that for words of another shape", () => {
    expect(wordsFor('{"pin": "k9Z3"} and more', "k9Z3")).toMatch(/^Unexpected non-whitespace character after JSON at position 16/);
    expect(parserWords(new Error("something quoting k9Z3"), new SentSecrets("t").scrub)).toBe("not valid JSON");
  });

  it("say no more than that in an older V8's shape, which names the character it stopped at unquoted", () => {
    // Node 18's V8: "Unexpected token X in JSON at position N", X the line's own character (here a PIN), unquoted.
    const sent = new SentSecrets("run-token-never-in-these-lines");
    sent.add(() => ["Q"]);
    expect(parserWords(new Error("Unexpected token Q in JSON at position 0"), sent.scrub)).toBe("not valid JSON");
  });
});
