import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestService, type TestService } from "../helpers/service";

/** `/favicon.ico`, which every browser asks the dashboard's and /docs' origin for. */
let svc: TestService;
beforeAll(async () => {
  svc = await createTestService();
});
afterAll(() => svc?.close());

describe("GET /favicon.ico", () => {
  it("is a 16×16 32-bit ICO: the accent disc with a white centre on a transparent ground", async () => {
    const res = await svc.request("/favicon.ico");
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("image/x-icon");
    expect(res.headers.get("cache-control")).toBe("public, max-age=86400");
    const bytes = new Uint8Array(await res.arrayBuffer());
    const view = new DataView(bytes.buffer);
    // ICONDIR and its one entry: type 1, 16×16, 32 bits, the image right after the entry.
    expect([view.getUint16(0, true), view.getUint16(2, true), view.getUint16(4, true)]).toEqual([0, 1, 1]);
    expect([bytes[6], bytes[7], view.getUint16(12, true)]).toEqual([16, 16, 32]);
    const size = view.getUint32(14, true);
    const offset = view.getUint32(18, true);
    expect(offset + size).toBe(bytes.length);
    // The BMP header: 40 bytes, 16 wide, 32 high (image and mask), 32 bits, uncompressed.
    expect(view.getUint32(offset, true)).toBe(40);
    expect([view.getInt32(offset + 4, true), view.getInt32(offset + 8, true)]).toEqual([16, 32]);
    expect([view.getUint16(offset + 14, true), view.getUint32(offset + 16, true)]).toEqual([32, 0]);
    const pixel = (x: number, y: number) => {
      const at = offset + 40 + ((15 - y) * 16 + x) * 4; // rows bottom-up, BGRA
      return [bytes[at + 2], bytes[at + 1], bytes[at], bytes[at + 3]];
    };
    expect(pixel(8, 8)).toEqual([255, 255, 255, 255]);
    expect(pixel(8, 2)).toEqual([0x1f, 0x5f, 0xbf, 255]);
    expect(pixel(0, 0)[3]).toBe(0);
  });

  it("needs no credential and is not a /v1 or dashboard route", async () => {
    const res = await svc.request("/favicon.ico", { headers: { authorization: "Bearer nonsense" } });
    expect(res.status).toBe(200);
    expect((await svc.request("/favicon.png")).status).toBe(404);
  });
});
