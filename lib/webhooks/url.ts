/**
 * Where a webhook may be sent: the pure decisions (no I/O), shared by both hosts.
 *
 * - `https://` only; `http://` only to a loopback host (localhost, 127.0.0.0/8, [::1]) and only
 *   with `allowHttp` (WEBHOOKS_ALLOW_HTTP=true: development and tests).
 * - No credentials in the URL.
 * - No private, loopback, link-local, shared (CGNAT), multicast, documentation or reserved
 *   address, as a literal (any form the URL parser normalises: `http://2130706433` is 127.0.0.1)
 *   or, on Node.js, as any address the name resolves to (`checkResolvedAddresses`).
 * - No names that only mean something inside a network: `localhost`, `*.localhost`, `*.local`,
 *   `*.internal`, `*.home.arpa` and single-label names.
 */
export type UrlDecision = { ok: true; url: URL; hostname: string; loopback: boolean } | { ok: false; reason: string };

export interface UrlPolicy {
  allowHttp: boolean;
}

const LOOPBACK_NAMES = new Set(["localhost", "localhost."]);

/** Said of a loopback endpoint (a receiver on the developer's machine) refused: the flag that allows it. */
const LOOPBACK_HINT =
  " (localhost, 127.0.0.1 and [::1] only with WEBHOOKS_ALLOW_HTTP=true on the server, for development)";

export function checkWebhookUrl(raw: string, policy: UrlPolicy): UrlDecision {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: "Not a valid URL" };
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    return { ok: false, reason: "Only https:// URLs are accepted" };
  }
  if (url.username || url.password) return { ok: false, reason: "Credentials in the URL are not accepted" };
  const hostname = url.hostname.toLowerCase();
  const bare = hostname.startsWith("[") ? hostname.slice(1, -1) : hostname;
  const loopback = LOOPBACK_NAMES.has(hostname) || isLoopbackAddress(bare);
  if (policy.allowHttp && loopback) return { ok: true, url, hostname: bare, loopback: true };
  if (url.protocol !== "https:") {
    return {
      ok: false,
      reason: policy.allowHttp
        ? "Only https:// URLs are accepted (WEBHOOKS_ALLOW_HTTP allows http:// only to localhost, 127.0.0.1 or [::1])"
        : "Only https:// URLs are accepted (http:// to localhost needs WEBHOOKS_ALLOW_HTTP=true on the server, for development)",
    };
  }
  const literal = parseIp(bare);
  if (literal) {
    return isPublicAddress(literal)
      ? { ok: true, url, hostname: bare, loopback: false }
      : { ok: false, reason: `The address ${bare} is private, loopback or reserved${loopback ? LOOPBACK_HINT : ""}` };
  }
  const name = bare.replace(/\.$/, "");
  if (
    name === "localhost" ||
    /\.(localhost|local|internal|home\.arpa|lan|intranet|corp)$/.test(name) ||
    !name.includes(".")
  ) {
    return { ok: false, reason: `The host ${bare} is not a public name${loopback ? LOOPBACK_HINT : ""}` };
  }
  return { ok: true, url, hostname: bare, loopback: false };
}

/** After resolving the name (Node.js): every address must be public (a loopback one only under allowHttp). */
export function checkResolvedAddresses(hostname: string, addresses: string[], policy: UrlPolicy): string | null {
  if (addresses.length === 0) return `The host ${hostname} did not resolve`;
  for (const address of addresses) {
    const ip = parseIp(address);
    if (!ip) return `The host ${hostname} resolved to an unreadable address ${address}`;
    if (policy.allowHttp && isLoopbackAddress(address)) continue;
    if (!isPublicAddress(ip))
      return `The host ${hostname} resolves to ${address}, a private, loopback or reserved address`;
  }
  return null;
}

type Ip = { v: 4; bytes: number[] } | { v: 6; bytes: number[] };

/** An IPv4 dotted quad or an IPv6 address (without brackets) as bytes; null when it is neither. */
export function parseIp(text: string): Ip | null {
  const v4 = parseIpv4(text);
  if (v4) return { v: 4, bytes: v4 };
  const v6 = parseIpv6(text);
  return v6 ? { v: 6, bytes: v6 } : null;
}

function parseIpv4(text: string): number[] | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  const bytes = parts.map((p) => (/^\d{1,3}$/.test(p) ? Number(p) : Number.NaN));
  return bytes.every((b) => b >= 0 && b <= 255) ? bytes : null;
}

function parseIpv6(input: string): number[] | null {
  if (!input.includes(":")) return null;
  let text = input;
  // A dotted IPv4 tail (::ffff:127.0.0.1) becomes its two groups.
  const lastColon = text.lastIndexOf(":");
  const tail = text.slice(lastColon + 1);
  if (tail.includes(".")) {
    const v4 = parseIpv4(tail);
    if (!v4) return null;
    text = `${text.slice(0, lastColon + 1)}${((v4[0] << 8) | v4[1]).toString(16)}:${((v4[2] << 8) | v4[3]).toString(16)}`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const parse = (s: string) => (s === "" ? [] : s.split(":"));
  const left = parse(halves[0]);
  const right = halves.length === 2 ? parse(halves[1]) : [];
  const missing = 8 - left.length - right.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...left, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...right];
  const bytes: number[] = [];
  for (const g of groups) {
    if (!/^[0-9a-f]{1,4}$/i.test(g)) return null;
    const n = Number.parseInt(g, 16);
    bytes.push(n >> 8, n & 0xff);
  }
  return bytes;
}

export function isLoopbackAddress(text: string): boolean {
  const ip = parseIp(text);
  if (!ip) return false;
  if (ip.v === 4) return ip.bytes[0] === 127;
  const v4 = embeddedIpv4(ip.bytes);
  if (v4) return v4[0] === 127;
  return ip.bytes.slice(0, 15).every((b) => b === 0) && ip.bytes[15] === 1;
}

/**
 * IPv4-mapped (::ffff:a.b.c.d), IPv4-translated (SIIT, ::ffff:0:a.b.c.d), IPv4-compatible
 * (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d) and 6to4 addresses.
 */
function embeddedIpv4(bytes: number[]): number[] | null {
  const zeros = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  if (zeros(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return bytes.slice(12);
  if (zeros(0, 8) && bytes[8] === 0xff && bytes[9] === 0xff && zeros(10, 12)) return bytes.slice(12);
  if (zeros(0, 12) && !(zeros(12, 15) && bytes[15] <= 1)) return bytes.slice(12);
  if (bytes[0] === 0 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zeros(4, 12)) {
    return bytes.slice(12);
  }
  // 6to4 (2002::/16): the IPv4 address a relay forwards to is bytes 2-5.
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return bytes.slice(2, 6);
  return null;
}

function isPublicIpv4([a, b, c]: number[]): boolean {
  if (a === 0 || a === 10 || a === 127) return false; // this network, private, loopback
  if (a === 100 && b >= 64 && b <= 127) return false; // shared address space (CGNAT)
  if (a === 169 && b === 254) return false; // link-local (cloud metadata)
  if (a === 172 && b >= 16 && b <= 31) return false; // private
  if (a === 192 && b === 168) return false; // private
  if (a === 192 && b === 0 && (c === 0 || c === 2)) return false; // IETF protocol assignments, TEST-NET-1
  if (a === 192 && b === 88 && c === 99) return false; // 6to4 relay anycast (deprecated)
  if (a === 198 && (b === 18 || b === 19)) return false; // benchmarking
  if (a === 198 && b === 51 && c === 100) return false; // TEST-NET-2
  if (a === 203 && b === 0 && c === 113) return false; // TEST-NET-3
  if (a >= 224) return false; // multicast, reserved, broadcast
  return true;
}

export function isPublicAddress(ip: Ip): boolean {
  if (ip.v === 4) return isPublicIpv4(ip.bytes);
  const b = ip.bytes;
  const v4 = embeddedIpv4(b);
  if (v4) return isPublicIpv4(v4);
  if (b.every((x) => x === 0)) return false; // ::
  if (b.slice(0, 15).every((x) => x === 0) && b[15] === 1) return false; // ::1
  if ((b[0] & 0xfe) === 0xfc) return false; // fc00::/7 unique local
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0x80) return false; // fe80::/10 link-local
  if (b[0] === 0xfe && (b[1] & 0xc0) === 0xc0) return false; // fec0::/10 site-local (deprecated)
  if (b[0] === 0xff) return false; // multicast
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] === 0x0d && b[3] === 0xb8) return false; // documentation
  if (b[0] === 0x01 && b.slice(1, 8).every((x) => x === 0)) return false; // 100::/64 discard
  // 2001::/23, IETF protocol assignments: Teredo (its client's IPv4 address is obfuscated in it),
  // benchmarking, ORCHID. No webhook receiver lives there.
  if (b[0] === 0x20 && b[1] === 0x01 && b[2] < 0x02) return false;
  // 64:ff9b:1::/48, local-use NAT64 (RFC 8215): a translator of the operator's own network.
  if (b[0] === 0 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && b[4] === 0 && b[5] === 1) return false;
  return true;
}
