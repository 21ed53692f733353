import { describe, expect, it } from "vitest";
import { configProblems } from "../../src/env";

/**
 * README: every Worker variable is "checked before anything starts". PUBLIC_URL is "the host's external origin"
 * where runners call back (`ctx.runtime.api.base_url` = PUBLIC_URL + `/v1/runs/{id}`, webhook URLs likewise). A value
 * that is no http(s) origin passes that check today, and every run then hands its runner a base URL it cannot call.
 */
const TOKEN = "an-admin-token-of-24-chars";

describe("PUBLIC_URL", () => {
  it("refuses a value without an http(s) scheme (a host:port typed without it), before anything starts", () => {
    expect(configProblems({ ADMIN_TOKEN: TOKEN, PUBLIC_URL: "localhost:8787" })).toEqual([expect.stringMatching(/^PUBLIC_URL: /)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, PUBLIC_URL: "agents.example.com:443" })).toEqual([expect.stringMatching(/^PUBLIC_URL: /)]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, PUBLIC_URL: "ftp://agents.example.com" })).toEqual([expect.stringMatching(/^PUBLIC_URL: /)]);
  });

  it("still takes an http(s) origin", () => {
    expect(configProblems({ ADMIN_TOKEN: TOKEN, PUBLIC_URL: "https://agents.example.com" })).toEqual([]);
    expect(configProblems({ ADMIN_TOKEN: TOKEN, PUBLIC_URL: "http://127.0.0.1:8787/" })).toEqual([]);
  });
});

describe("ADMIN_TOKEN", () => {
  it("refuses a token no request could present (a bearer ends at its first space), before anything starts", () => {
    expect(configProblems({ ADMIN_TOKEN: "correct horse battery staple" })).toEqual([expect.stringMatching(/^ADMIN_TOKEN: .*without spaces/)]);
    expect(configProblems({ ADMIN_TOKEN: "ünïcödé-token-of-length" })).toEqual([expect.stringMatching(/^ADMIN_TOKEN: /)]);
  });
});
