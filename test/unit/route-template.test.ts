import { describe, expect, it } from "vitest";
import { createRouteTable } from "../../local/route-template.js";

/** The route values `template` gives `path`, or null when it does not match. */
function match(template: string, path: string): Record<string, string> | null {
  const found = createRouteTable([{ template, methods: [], value: 0 }]).find("GET", path);
  return found.kind === "match" ? found.params : null;
}

describe("route templates: literals and simple parameters", () => {
  it("matches a literal-only template", () => {
    expect(match("health/queue", "health/queue")).toEqual({});
    expect(match("health/queue", "health")).toBeNull();
    expect(match("health/queue", "health/queue/extra")).toBeNull();
  });

  it("compares literals case-insensitively, as Azure does", () => {
    expect(match("Health/Queue", "HEALTH/queue")).toEqual({});
  });

  it("extracts a {name} parameter, keeping its value's case", () => {
    expect(match("health/queue/result/{task_id}", "health/queue/result/AbC")).toEqual({ task_id: "AbC" });
  });

  it("keeps the parameter name as written while literal matching ignores case", () => {
    expect(match("jobs/{JobId}", "JOBS/x")).toEqual({ JobId: "x" });
  });

  it("requires a parameter segment to be present and non-empty", () => {
    expect(match("jobs/{id}", "jobs")).toBeNull();
    expect(match("jobs/{id}/logs", "jobs//logs")).toBeNull();
  });

  it("ignores a trailing slash (and a leading one) on the path", () => {
    expect(match("jobs/{id}", "jobs/42/")).toEqual({ id: "42" });
    expect(match("jobs/{id}", "/jobs/42")).toEqual({ id: "42" });
    expect(match("jobs", "jobs/")).toEqual({});
  });

  it("matches the empty template against the empty path only", () => {
    expect(match("", "")).toEqual({});
    expect(match("", "/")).toEqual({});
    expect(match("", "x")).toBeNull();
  });

  it("ignores leading and trailing slashes in the template", () => {
    expect(match("/jobs/{id}/", "jobs/1")).toEqual({ id: "1" });
  });
});

describe("route templates: percent-decoding", () => {
  it("decodes parameter values", () => {
    expect(match("files/{name}", "files/hello%20world")).toEqual({ name: "hello world" });
  });

  it("keeps an encoded slash inside its segment and decodes it", () => {
    expect(match("files/{name}", "files/a%2Fb")).toEqual({ name: "a/b" });
    expect(match("files/{name}/meta", "files/a%2Fb/meta")).toEqual({ name: "a/b" });
  });

  it("treats a malformed escape as no match instead of throwing", () => {
    expect(match("files/{name}", "files/%E0%A4%A")).toBeNull();
  });

  it("decodes literal segments before comparing them", () => {
    expect(match("health/queue", "health/%71ueue")).toEqual({});
  });
});

describe("route templates: optional parameters and the int constraint", () => {
  it("includes an optional parameter when present and omits it when absent", () => {
    expect(match("boom/{kind?}", "boom/deep")).toEqual({ kind: "deep" });
    expect(match("boom/{kind?}", "boom")).toEqual({});
  });

  it("int accepts 32-bit integers with an optional sign", () => {
    for (const value of ["0", "42", "-7", "+7", "2147483647", "-2147483648"])
      expect(match("ticks/{count:int}", `ticks/${value}`), value).toEqual({ count: value });
    for (const value of ["2147483648", "-2147483649", "1.5", "x", "1e3"])
      expect(match("ticks/{count:int}", `ticks/${value}`), value).toBeNull();
  });
});

describe("route templates the local host refuses (no route uses them; Azure would match them differently)", () => {
  it.each([
    ["files/{*path}", /parameter "\{\*path\}" is not supported/],
    ["a/{x=1}", /parameter "\{x=1\}" is not supported/],
    ["a/{x:guid}", /constraint "guid" is not supported by the local Functions host \(only int\)/],
    ["a/{x:int:min(1)}", /constraint "int:min\(1\)" is not supported/],
    ["files/{name}.{ext}", /segment "\{name\}\.\{ext\}" is not supported/],
    ["a/{x?}/b", /optional parameter must not be followed by a required segment/],
    ["{x?}/{y}", /optional parameter must not be followed by a required segment/],
    ["{id}/{ID}", /duplicate parameter name "ID"/],
    ["a//b", /empty segment/],
    ["a?/b", /segment "a\?" is not supported/],
  ])("refuses %j", (template, message) => {
    expect(() => createRouteTable([{ template, methods: ["GET"], value: 0 }])).toThrow(message);
    expect(() => createRouteTable([{ template, methods: ["GET"], value: 0 }])).toThrow(
      `invalid route template "${template}"`,
    );
  });
});

describe("createRouteTable", () => {
  it("prefers a literal segment over a parameter regardless of registration order", () => {
    for (const entries of [
      [
        { template: "jobs/{id}", methods: ["GET"], value: "get-job" },
        { template: "jobs/list", methods: ["GET"], value: "list-jobs" },
      ],
      [
        { template: "jobs/list", methods: ["GET"], value: "list-jobs" },
        { template: "jobs/{id}", methods: ["GET"], value: "get-job" },
      ],
    ]) {
      const table = createRouteTable(entries);
      expect(table.find("GET", "jobs/list")).toEqual({ kind: "match", value: "list-jobs", params: {} });
      expect(table.find("GET", "jobs/42")).toEqual({ kind: "match", value: "get-job", params: { id: "42" } });
    }
  });

  it("prefers a constrained parameter over an unconstrained one", () => {
    const table = createRouteTable([
      { template: "items/{name}", methods: ["GET"], value: "by-name" },
      { template: "items/{id:int}", methods: ["GET"], value: "by-id" },
    ]);
    expect(table.find("GET", "items/5")).toEqual({ kind: "match", value: "by-id", params: { id: "5" } });
    expect(table.find("GET", "items/five")).toEqual({ kind: "match", value: "by-name", params: { name: "five" } });
  });

  it("breaks ties by registration order", () => {
    const table = createRouteTable([
      { template: "{a}/x", methods: ["GET"], value: "first" },
      { template: "y/{b}", methods: ["GET"], value: "second" },
    ]);
    expect(table.find("GET", "y/x")).toEqual({ kind: "match", value: "first", params: { a: "y" } });
  });

  it("falls back to a less specific route that accepts the method", () => {
    const table = createRouteTable([
      { template: "jobs/list", methods: ["POST"], value: "post-list" },
      { template: "jobs/{id}", methods: ["GET"], value: "get-job" },
    ]);
    expect(table.find("GET", "jobs/list")).toEqual({ kind: "match", value: "get-job", params: { id: "list" } });
  });

  it("reports method-not-allowed with the sorted, uppercase union of allowed methods", () => {
    const table = createRouteTable([
      { template: "jobs/{id}", methods: ["get", "Delete"], value: 1 },
      { template: "jobs/{id:int}", methods: ["PUT", "GET"], value: 2 },
      { template: "other", methods: ["PATCH"], value: 3 },
    ]);
    expect(table.find("POST", "jobs/5")).toEqual({ kind: "method-not-allowed", allowed: ["DELETE", "GET", "PUT"] });
    expect(table.find("POST", "jobs/x")).toEqual({ kind: "method-not-allowed", allowed: ["DELETE", "GET"] });
  });

  it("matches methods case-insensitively", () => {
    const table = createRouteTable([{ template: "jobs", methods: ["post"], value: "create" }]);
    expect(table.find("POST", "jobs")).toEqual({ kind: "match", value: "create", params: {} });
    expect(table.find("Post", "jobs")).toEqual({ kind: "match", value: "create", params: {} });
  });

  it("does not imply HEAD from GET", () => {
    const table = createRouteTable([{ template: "health", methods: ["GET"], value: "health" }]);
    expect(table.find("HEAD", "health")).toEqual({ kind: "method-not-allowed", allowed: ["GET"] });
  });

  it("accepts every method when the method list is empty", () => {
    const table = createRouteTable([{ template: "any", methods: [], value: "any" }]);
    expect(table.find("OPTIONS", "any")).toEqual({ kind: "match", value: "any", params: {} });
  });

  it("returns not-found when no template matches the path", () => {
    const table = createRouteTable([{ template: "jobs/{id:int}", methods: ["GET"], value: 1 }]);
    expect(table.find("GET", "jobs/abc")).toEqual({ kind: "not-found" });
    expect(table.find("GET", "nothing")).toEqual({ kind: "not-found" });
    expect(createRouteTable([]).find("GET", "")).toEqual({ kind: "not-found" });
  });

  it("refuses a template the local host does not support when the table is built, naming it", () => {
    expect(() => createRouteTable([{ template: "a/{b", methods: ["GET"], value: 0 }])).toThrow(
      /invalid route template "a\/\{b": segment "\{b" is not supported/,
    );
  });
});
