import * as z from "zod";

const TextLinkSchema = z.looseObject({ type: z.literal("text_link"), offset: z.int().nonnegative(), length: z.int().positive(), url: z.string().min(1) });

/**
 * The text with each hyperlinked span followed by its target, "label (url)": a runner has only the text, and
 * the word a user linked says little without where it points. Offsets count UTF-16 units, as JavaScript's do.
 */
export function withLinkTargets(text: string, entities: unknown[] | undefined): string {
  const links = (entities ?? []).flatMap((e) => {
    const link = TextLinkSchema.safeParse(e);
    return link.success && link.data.offset + link.data.length <= text.length ? [link.data] : [];
  });
  let out = "";
  let at = 0;
  for (const link of links.sort((a, b) => a.offset - b.offset)) {
    const end = link.offset + link.length;
    if (link.offset < at) continue;
    const label = text.slice(link.offset, end);
    out += text.slice(at, end) + (label === link.url ? "" : ` (${link.url})`);
    at = end;
  }
  return out + text.slice(at);
}
