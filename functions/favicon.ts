import type { Context } from "hono";

const SIZE = 16;
/** The dashboard's accent (ui/src/styles.css, --accent), as [r, g, b]. */
const ACCENT = [0x1f, 0x5f, 0xbf] as const;

/**
 * The site icon: a 16×16 ICO (one 32-bit BMP image, alpha for transparency) of a disc in the
 * dashboard's accent with a white centre, drawn here, so no file and no fetch is needed on either
 * host. Browsers ask every origin for /favicon.ico; without it the dashboard and /docs log a 404.
 */
export function faviconIco(): Uint8Array {
  const pixels = SIZE * SIZE * 4;
  const mask = SIZE * 4; // 1 bit a pixel, rows padded to 32 bits: all 0 (the alpha decides)
  const image = 40 + pixels + mask;
  const out = new Uint8Array(6 + 16 + image);
  const view = new DataView(out.buffer);
  // ICONDIR: reserved, type 1 (icon), one image.
  view.setUint16(2, 1, true);
  view.setUint16(4, 1, true);
  // ICONDIRENTRY: 16×16, no palette, 1 plane, 32 bits, its size and offset.
  out[6] = SIZE;
  out[7] = SIZE;
  view.setUint16(10, 1, true);
  view.setUint16(12, 32, true);
  view.setUint32(14, image, true);
  view.setUint32(18, 22, true);
  // BITMAPINFOHEADER: the height counts the image and its mask.
  view.setUint32(22, 40, true);
  view.setInt32(26, SIZE, true);
  view.setInt32(30, SIZE * 2, true);
  view.setUint16(34, 1, true);
  view.setUint16(36, 32, true);
  view.setUint32(42, pixels + mask, true);
  for (let row = 0; row < SIZE; row++) {
    for (let x = 0; x < SIZE; x++) {
      const y = SIZE - 1 - row; // rows are stored bottom-up
      const distance = Math.hypot(x + 0.5 - SIZE / 2, y + 0.5 - SIZE / 2);
      const [r, g, b] = distance < 3 ? [0xff, 0xff, 0xff] : ACCENT;
      const alpha = Math.round(Math.max(0, Math.min(1, SIZE / 2 - distance + 0.5)) * 255);
      out.set([b, g, r, alpha], 62 + (row * SIZE + x) * 4);
    }
  }
  return out;
}

let cached: Uint8Array | undefined;

/** `GET /favicon.ico`: the icon, cached for a day. */
export function faviconRoute(c: Context) {
  cached ??= faviconIco();
  return c.body(cached.slice(), 200, { "content-type": "image/x-icon", "cache-control": "public, max-age=86400" });
}
