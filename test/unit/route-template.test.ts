import { describe, expect, it } from "vitest";
import { compileRouteTemplate, createRouteTable } from "../../local/route-template.js";

const match = (template: string, path: string) => compileRouteTemplate(template).match(path);

describe("compileRouteTemplate: literals and simple parameters", () => {
  it("matches a literal-only template and reports its literal segment count", () => {
    const route = compileRouteTemplate("health/queue");
    expect(route.template).toBe("health/queue");
    expect(route.literalSegments).toBe(2);
    expect(route.match("health/queue")).toEqual({});
    expect(route.match("health")).toBeNull();
    expect(route.match("health/queue/extra")).toBeNull();
  });

  it("compares literals case-insensitively", () => {
    expect(match("Health/Queue", "HEALTH/queue")).toEqual({});
  });

  it("extracts a {name} parameter", () => {
    const route = compileRouteTemplate("health/queue/result/{task_id}");
    expect(route.literalSegments).toBe(3);
    expect(route.match("health/queue/result/abc")).toEqual({ task_id: "abc" });
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

describe("compileRouteTemplate: percent-decoding", () => {
  it("decodes parameter values", () => {
    expect(match("files/{name}", "files/hello%20world")).toEqual({ name: "hello world" });
  });

  it("keeps an encoded slash inside its segment and decodes it", () => {
    expect(match("files/{name}", "files/a%2Fb")).toEqual({ name: "a/b" });
    expect(match("files/{name}/meta", "files/a%2Fb/meta")).toEqual({ name: "a/b" });
  });

  it("treats a malformed escape as no match instead of throwing", () => {
    expect(match("files/{name}", "files/%E0%A4%A")).toBeNull();
    expect(match("files/{name}", "files/%zz")).toBeNull();
    expect(match("files/{*rest}", "files/a/%")).toBeNull();
  });

  it("decodes literal segments before comparing them", () => {
    expect(match("my files/{id}", "my%20files/1")).toEqual({ id: "1" });
  });
});

describe("compileRouteTemplate: optional parameters and defaults", () => {
  it("includes an optional parameter when present and omits it when absent", () => {
    const route = compileRouteTemplate("jobs/{id?}");
    expect(route.match("jobs/7")).toEqual({ id: "7" });
    expect(route.match("jobs")).toEqual({});
    expect(route.match("jobs/")).toEqual({});
    expect(route.match("jobs/7/8")).toBeNull();
  });

  it("allows several trailing optional parameters", () => {
    const route = compileRouteTemplate("a/{x?}/{y?}");
    expect(route.match("a")).toEqual({});
    expect(route.match("a/1")).toEqual({ x: "1" });
    expect(route.match("a/1/2")).toEqual({ x: "1", y: "2" });
  });

  it("fills in default values when the segment is absent", () => {
    const route = compileRouteTemplate("reports/{format=json}");
    expect(route.match("reports")).toEqual({ format: "json" });
    expect(route.match("reports/csv")).toEqual({ format: "csv" });
  });

  it("lets an optional parameter be followed by defaulted ones", () => {
    const route = compileRouteTemplate("r/{a?}/{b=z}");
    expect(route.match("r")).toEqual({ b: "z" });
    expect(route.match("r/1")).toEqual({ a: "1", b: "z" });
  });

  it("treats a defaulted parameter followed by a required segment as required", () => {
    const route = compileRouteTemplate("{tenant=main}/jobs");
    expect(route.match("acme/jobs")).toEqual({ tenant: "acme" });
    expect(route.match("jobs")).toBeNull();
  });

  it("applies constraints to a present optional parameter but not to an absent one", () => {
    const route = compileRouteTemplate("jobs/{id:int?}");
    expect(route.match("jobs/12")).toEqual({ id: "12" });
    expect(route.match("jobs/abc")).toBeNull();
    expect(route.match("jobs")).toEqual({});
  });

  it("supports a default value together with a constraint", () => {
    const route = compileRouteTemplate("page/{n:int=1}");
    expect(route.match("page")).toEqual({ n: "1" });
    expect(route.match("page/3")).toEqual({ n: "3" });
    expect(route.match("page/x")).toBeNull();
  });
});

describe("compileRouteTemplate: catch-all parameters", () => {
  it("captures the rest of the path including nested slashes", () => {
    const route = compileRouteTemplate("files/{*path}");
    expect(route.literalSegments).toBe(1);
    expect(route.match("files/a/b/c.txt")).toEqual({ path: "a/b/c.txt" });
    expect(route.match("files/a")).toEqual({ path: "a" });
  });

  it("omits an empty catch-all from the result", () => {
    const route = compileRouteTemplate("files/{*path}");
    expect(route.match("files")).toEqual({});
    expect(route.match("files/")).toEqual({});
  });

  it("uses the default of an empty catch-all", () => {
    expect(match("files/{*path=index.html}", "files")).toEqual({ path: "index.html" });
  });

  it("accepts the ** form and decodes the captured rest", () => {
    expect(match("proxy/{**rest}", "proxy/a%20b/c%2Fd")).toEqual({ rest: "a b/c/d" });
  });

  it("drops only the final trailing slash from the rest", () => {
    expect(match("files/{*path}", "files/a/b/")).toEqual({ path: "a/b" });
  });

  it("applies constraints to the whole captured rest", () => {
    const route = compileRouteTemplate("files/{*path:regex(.*\\.txt)}");
    expect(route.match("files/a/b.txt")).toEqual({ path: "a/b.txt" });
    expect(route.match("files/a/b.bin")).toBeNull();
  });
});

describe("compileRouteTemplate: constraints", () => {
  it("int accepts 32-bit integers with an optional sign", () => {
    const route = compileRouteTemplate("n/{v:int}");
    expect(route.match("n/42")).toEqual({ v: "42" });
    expect(route.match("n/-7")).toEqual({ v: "-7" });
    expect(route.match("n/2147483647")).toEqual({ v: "2147483647" });
    expect(route.match("n/2147483648")).toBeNull();
    expect(route.match("n/4.2")).toBeNull();
    expect(route.match("n/abc")).toBeNull();
  });

  it("long accepts 64-bit integers", () => {
    const route = compileRouteTemplate("n/{v:long}");
    expect(route.match("n/9223372036854775807")).toEqual({ v: "9223372036854775807" });
    expect(route.match("n/9223372036854775808")).toBeNull();
    expect(route.match("n/12x")).toBeNull();
  });

  it("guid accepts the D, N, B and P formats", () => {
    const route = compileRouteTemplate("g/{id:guid}");
    const d = "3f2504e0-4f89-11d3-9a0c-0305e82c3301";
    expect(route.match(`g/${d}`)).toEqual({ id: d });
    expect(route.match(`g/${d.toUpperCase()}`)).toEqual({ id: d.toUpperCase() });
    expect(route.match("g/3f2504e04f8911d39a0c0305e82c3301")).not.toBeNull();
    expect(route.match(`g/%7B${d}%7D`)).toEqual({ id: `{${d}}` });
    expect(route.match(`g/(${d})`)).not.toBeNull();
    expect(route.match("g/3f2504e0-4f89-11d3-9a0c")).toBeNull();
    expect(route.match("g/not-a-guid")).toBeNull();
  });

  it("alpha accepts ASCII letters only", () => {
    const route = compileRouteTemplate("a/{v:alpha}");
    expect(route.match("a/AbC")).toEqual({ v: "AbC" });
    expect(route.match("a/abc1")).toBeNull();
  });

  it("bool accepts true/false in any case", () => {
    const route = compileRouteTemplate("b/{v:bool}");
    expect(route.match("b/true")).toEqual({ v: "true" });
    expect(route.match("b/FALSE")).toEqual({ v: "FALSE" });
    expect(route.match("b/yes")).toBeNull();
    expect(route.match("b/1")).toBeNull();
  });

  it("minlength, maxlength and length check the decoded value", () => {
    const min = compileRouteTemplate("s/{v:minlength(3)}");
    expect(min.match("s/abc")).toEqual({ v: "abc" });
    expect(min.match("s/ab")).toBeNull();
    const max = compileRouteTemplate("s/{v:maxlength(3)}");
    expect(max.match("s/abc")).toEqual({ v: "abc" });
    expect(max.match("s/abcd")).toBeNull();
    expect(max.match("s/a%20%20")).toEqual({ v: "a  " });
    const exact = compileRouteTemplate("s/{v:length(2)}");
    expect(exact.match("s/ab")).toEqual({ v: "ab" });
    expect(exact.match("s/a")).toBeNull();
    expect(exact.match("s/abc")).toBeNull();
    const between = compileRouteTemplate("s/{v:length(2,3)}");
    expect(between.match("s/ab")).not.toBeNull();
    expect(between.match("s/abc")).not.toBeNull();
    expect(between.match("s/abcd")).toBeNull();
  });

  it("min, max and range compare integers and reject non-integers", () => {
    const min = compileRouteTemplate("n/{v:min(10)}");
    expect(min.match("n/10")).toEqual({ v: "10" });
    expect(min.match("n/9")).toBeNull();
    expect(min.match("n/ten")).toBeNull();
    const max = compileRouteTemplate("n/{v:max(10)}");
    expect(max.match("n/-3")).toEqual({ v: "-3" });
    expect(max.match("n/11")).toBeNull();
    const range = compileRouteTemplate("n/{v:range(1,5)}");
    expect(range.match("n/1")).not.toBeNull();
    expect(range.match("n/5")).not.toBeNull();
    expect(range.match("n/0")).toBeNull();
    expect(range.match("n/6")).toBeNull();
  });

  it("chains several constraints, all of which must hold", () => {
    const route = compileRouteTemplate("jobs/{id:int:min(1)}");
    expect(route.match("jobs/1")).toEqual({ id: "1" });
    expect(route.match("jobs/0")).toBeNull();
    expect(route.match("jobs/x")).toBeNull();
    const three = compileRouteTemplate("p/{v:int:min(1):max(3)}");
    expect(three.match("p/3")).not.toBeNull();
    expect(three.match("p/4")).toBeNull();
  });

  it("anchors regex constraints to the whole value", () => {
    const route = compileRouteTemplate("r/{code:regex([a-z]{{2}}\\d)}");
    expect(route.match("r/ab1")).toEqual({ code: "ab1" });
    expect(route.match("r/xab1")).toBeNull();
    expect(route.match("r/ab12")).toBeNull();
  });

  it("matches regex constraints case-insensitively like ASP.NET Core", () => {
    expect(match("r/{v:regex(abc)}", "r/ABC")).toEqual({ v: "ABC" });
  });

  it("lets regex constraints contain ')', ':' and '?'", () => {
    const route = compileRouteTemplate("r/{v:regex(^(a|b):(c)?d$)}");
    expect(route.match("r/a:cd")).toEqual({ v: "a:cd" });
    expect(route.match("r/b:d")).toEqual({ v: "b:d" });
    expect(route.match("r/c:d")).toBeNull();
  });

  it("skips escaped parentheses and those inside character classes", () => {
    expect(match("r/{v:regex(a\\)[)(]b)}", "r/a))b")).toEqual({ v: "a))b" });
    expect(match("r/{v:regex(a\\)[)(]b)}", "r/a)(b")).toEqual({ v: "a)(b" });
  });

  it("supports a regex constraint on an optional parameter", () => {
    const route = compileRouteTemplate("r/{v:regex(x+)?}");
    expect(route.match("r/xxx")).toEqual({ v: "xxx" });
    expect(route.match("r/y")).toBeNull();
    expect(route.match("r")).toEqual({});
  });
});

describe("compileRouteTemplate: invalid templates", () => {
  const rejects = (template: string, message: RegExp) => () => {
    expect(() => compileRouteTemplate(template)).toThrow(message);
  };

  it("rejects a missing closing brace", rejects("jobs/{id", /unbalanced braces/));
  it("rejects a stray closing brace", rejects("jobs/id}", /unbalanced brace/));
  it("rejects an unescaped brace inside a parameter", rejects("r/{v:regex(\\d{3})}", /unescaped '\{'/));
  it("rejects two catch-alls", rejects("a/{*x}/{*y}", /only one catch-all/));
  it("rejects a catch-all that is not last", rejects("a/{*x}/b", /must be the last segment/));
  it("rejects an optional parameter followed by a literal", rejects("a/{x?}/b", /followed by a required segment/));
  it("rejects an optional parameter followed by a parameter", rejects("{x?}/{y}", /followed by a required segment/));
  it("rejects an optional catch-all", rejects("a/{*x?}", /cannot be marked optional/));
  it("rejects an optional parameter with a default", rejects("a/{x?=1}", /optional and have a default/));
  it("rejects a parameter without a name", rejects("a/{}", /has no name/));
  it("rejects a catch-all without a name", rejects("a/{*}", /has no name/));
  it("rejects duplicate parameter names (case-insensitively)", rejects("{id}/{ID}", /duplicate parameter name/));
  it("rejects consecutive slashes", rejects("a//b", /empty segment/));
  it("rejects complex segments", rejects("files/{name}.{ext}", /complex segments/));
  it("rejects literals followed by a parameter in one segment", rejects("files/x{name}", /complex segments/));
  it("rejects '?' in a literal", rejects("a?/b", /may not contain '\?'/));
  it("rejects an unknown constraint", rejects("a/{x:datetimeoffset}", /unsupported constraint "datetimeoffset"/));
  it("rejects an empty constraint", rejects("a/{x:}", /empty constraint/));
  it("rejects arguments on argument-less constraints", rejects("a/{x:int(3)}", /takes no arguments/));
  it("rejects non-integer constraint arguments", rejects("a/{x:min(one)}", /integer argument/));
  it("rejects a missing constraint argument", rejects("a/{x:minlength}", /integer argument/));
  it("rejects a reversed range", rejects("a/{x:range(5,1)}", /minimum is greater than maximum/));
  it("rejects reversed length bounds", rejects("a/{x:length(5,1)}", /invalid length bounds/));
  it("rejects an unclosed constraint argument", rejects("a/{x:regex(abc}", /missing its closing '\)'/));
  it("rejects an invalid regex", rejects("a/{x:regex([a-)}", /invalid pattern/));
  it("rejects an empty regex", rejects("a/{x:regex()}", /needs a pattern/));

  it("names the template in the error message", () => {
    expect(() => compileRouteTemplate("jobs/{id")).toThrow('invalid route template "jobs/{id"');
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

  it("prefers a non-catch-all over a catch-all", () => {
    const table = createRouteTable([
      { template: "static/{*path}", methods: ["GET"], value: "catch-all" },
      { template: "static/{file}", methods: ["GET"], value: "single" },
    ]);
    expect(table.find("GET", "static/a.css")).toEqual({ kind: "match", value: "single", params: { file: "a.css" } });
    expect(table.find("GET", "static/css/a.css")).toEqual({
      kind: "match",
      value: "catch-all",
      params: { path: "css/a.css" },
    });
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

  it("rejects an invalid template when the table is built", () => {
    expect(() => createRouteTable([{ template: "a/{b", methods: ["GET"], value: 0 }])).toThrow(/unbalanced braces/);
  });
});
