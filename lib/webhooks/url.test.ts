import { describe, expect, it } from "vitest";
import { checkResolvedAddresses, checkWebhookUrl, isLoopbackAddress, parseIp } from "./url";

const prod = { allowHttp: false };
const dev = { allowHttp: true };
const refused = (url: string, policy = prod) => {
  const d = checkWebhookUrl(url, policy);
  return d.ok ? null : d.reason;
};

describe("webhook URL policy (SSRF)", () => {
  it("accepts public https URLs", () => {
    expect(refused("https://hooks.example.com/in?x=1")).toBeNull();
    expect(refused("https://93.184.216.34/hook")).toBeNull();
    expect(refused("https://[2606:4700::1111]/hook")).toBeNull();
  });

  it("refuses other schemes, plain http and credentials", () => {
    expect(refused("ftp://example.com/")).toMatch(/https/);
    expect(refused("http://example.com/")).toMatch(/https/);
    expect(refused("http://example.com/", dev)).toMatch(/localhost/);
    expect(refused("https://user:pw@example.com/")).toMatch(/Credentials/);
    expect(refused("not a url")).toMatch(/valid/);
  });

  it("refuses private, loopback, link-local and reserved literals in every spelling", () => {
    for (const host of [
      "127.0.0.1",
      "127.1",
      "2130706433",
      "0x7f000001",
      "10.0.0.5",
      "172.16.3.4",
      "172.31.255.255",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "224.0.0.1",
      "255.255.255.255",
      "[::1]",
      "[::]",
      "[fd00::1]",
      "[fe80::1]",
      "[::ffff:127.0.0.1]",
      "[::ffff:a9fe:a9fe]",
      "[64:ff9b::10.0.0.1]",
      "[2002:7f00:1::]",
      "[2002:a9fe:a9fe::1]",
      "[ff02::1]",
      "[::ffff:0:7f00:1]",
      "[64:ff9b:1::7f00:1]",
      "[64:ff9b:1::a00:1]",
      "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
      "[2001::1]",
      "[2001:2::1]",
      "[2001:10::1]",
      "192.88.99.1",
    ]) {
      expect(refused(`https://${host}/hook`), host).toMatch(/private|reserved/);
    }
    expect(refused("https://172.32.0.1/")).toBeNull();
    // 6to4 of a public address is public.
    expect(refused("https://[2002:808:808::1]/")).toBeNull();
    expect(refused("https://100.128.0.1/")).toBeNull();
    // Outside the protocol assignments of 2001::/23, 2001: is ordinary global unicast.
    expect(refused("https://[2001:4860:4860::8888]/")).toBeNull();
  });

  it("refuses names that only mean something inside a network", () => {
    for (const host of ["localhost", "foo.localhost", "printer.local", "metadata.google.internal", "intranet"]) {
      expect(refused(`https://${host}/`), host).toMatch(/not a public name|private/);
    }
  });

  it("names WEBHOOKS_ALLOW_HTTP where it is what would make the URL acceptable", () => {
    const hint = "(localhost, 127.0.0.1 and [::1] only with WEBHOOKS_ALLOW_HTTP=true on the server, for development)";
    expect(refused("https://localhost/hook")).toBe(`The host localhost is not a public name ${hint}`);
    expect(refused("https://127.0.0.1/hook")).toBe(`The address 127.0.0.1 is private, loopback or reserved ${hint}`);
    expect(refused("https://[::1]/hook")).toBe(`The address ::1 is private, loopback or reserved ${hint}`);
    expect(refused("http://example.com/")).toBe(
      "Only https:// URLs are accepted (http:// to localhost needs WEBHOOKS_ALLOW_HTTP=true on the server, for development)",
    );
    expect(refused("http://example.com/", dev)).toBe(
      "Only https:// URLs are accepted (WEBHOOKS_ALLOW_HTTP allows http:// only to localhost, 127.0.0.1 or [::1])",
    );
    // The flag would not help a private address or an internal name: no mention of it.
    expect(refused("https://10.0.0.1/hook")).not.toMatch(/WEBHOOKS_ALLOW_HTTP/);
    expect(refused("https://printer.local/hook")).not.toMatch(/WEBHOOKS_ALLOW_HTTP/);
  });

  it("allows http and https to loopback only under the development flag", () => {
    expect(refused("http://127.0.0.1:8080/hook", dev)).toBeNull();
    expect(refused("http://localhost:8080/hook", dev)).toBeNull();
    expect(refused("http://[::1]:8080/hook", dev)).toBeNull();
    expect(refused("https://127.0.0.1/hook", dev)).toBeNull();
    expect(refused("http://10.0.0.1/hook", dev)).toMatch(/https/);
    expect(refused("https://10.0.0.1/hook", dev)).toMatch(/private/);
  });

  it("checks every resolved address", () => {
    expect(checkResolvedAddresses("a.example", ["93.184.216.34"], prod)).toBeNull();
    expect(checkResolvedAddresses("a.example", ["93.184.216.34", "10.1.2.3"], prod)).toMatch(/10\.1\.2\.3/);
    expect(checkResolvedAddresses("a.example", ["::1"], prod)).toMatch(/::1/);
    expect(checkResolvedAddresses("a.example", ["127.0.0.1"], dev)).toBeNull();
    expect(checkResolvedAddresses("a.example", [], prod)).toMatch(/did not resolve/);
  });

  it("parses addresses", () => {
    expect(parseIp("::ffff:1.2.3.4")?.bytes.slice(10)).toEqual([0xff, 0xff, 1, 2, 3, 4]);
    expect(parseIp("1:2:3:4:5:6:7:8:9")).toBeNull();
    expect(parseIp("1.2.3")).toBeNull();
    expect(isLoopbackAddress("127.9.9.9")).toBe(true);
    expect(isLoopbackAddress("::ffff:127.0.0.1")).toBe(true);
  });
});
