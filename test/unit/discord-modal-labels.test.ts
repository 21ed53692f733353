import { describe, expect, it } from "vitest";
import { InteractionSchema, normalizeInteraction } from "../../src/platforms/discord/normalize";

/**
 * Discord's modals now wrap each input in a Label component (type 18), and a
 * modal submit reports it as `{type: 18, id, component: {type: 4, custom_id, value}}`
 * (components reference, "Label Interaction Response Structure"; discord-api-types'
 * ModalSubmitLabelComponent). What the user typed must reach the runner, as it does
 * for the older Action Row layout.
 */
const submit = (components: unknown[]) =>
  InteractionSchema.parse({
    id: "900000000000000001",
    application_id: "1122334455667788",
    type: 5,
    token: "tok",
    channel_id: "C1",
    channel: { id: "C1", type: 0 },
    member: { user: { id: "U42", username: "ada" } },
    data: { custom_id: "feedback_modal", components },
  });

describe("Discord modal submit", () => {
  it("reads text inputs wrapped in Label components (type 18)", () => {
    const [ev] = normalizeInteraction(
      submit([
        { type: 18, id: 1, component: { type: 4, id: 2, custom_id: "title", value: "Login broken" } },
        { type: 18, id: 3, component: { type: 4, id: 4, custom_id: "details", value: "The button does nothing" } },
      ]),
    );
    expect(ev.eventType).toBe("message.received");
    expect(ev.text).toBe("Login broken\nThe button does nothing");
    expect(ev.data.modal).toEqual({ custom_id: "feedback_modal", fields: { title: "Login broken", details: "The button does nothing" } });
  });

  it("reads a select's values and a file upload's files in Labels", () => {
    const i = submit([
      { type: 18, id: 1, component: { type: 3, id: 2, custom_id: "severity", values: ["high"] } },
      { type: 18, id: 3, component: { type: 19, id: 4, custom_id: "screenshot", values: ["111"] } },
    ]);
    i.data!.resolved = { attachments: { "111": { id: "111", url: "https://cdn.discordapp.com/a/shot.png", filename: "shot.png", content_type: "image/png" } } };
    const [ev] = normalizeInteraction(i);
    expect(ev.text).toBe("high");
    expect(ev.files).toEqual([{ ref: "https://cdn.discordapp.com/a/shot.png", name: "shot.png", mimeType: "image/png", artifactType: "image" }]);
  });

  it("still reads the Action Row layout", () => {
    const [ev] = normalizeInteraction(submit([{ type: 1, components: [{ type: 4, custom_id: "title", value: "hi" }] }]));
    expect(ev.text).toBe("hi");
  });
});
