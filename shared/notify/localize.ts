import { createInstance, type i18n } from "i18next";
import { type Catalog, en, type PartialCatalog } from "./locales/en.js";
import { ko } from "./locales/ko.js";
import type { Notification } from "./types.js";

/** The locales a channel may declare (matrix `locale`). */
export const LOCALES = ["en", "ko"] as const;
export type Locale = (typeof LOCALES)[number];

/** The bundled catalogs: English complete, the others any part of it. */
export const CATALOGS: { en: Catalog } & Record<Exclude<Locale, "en">, PartialCatalog> = { en, ko };

type Params = Readonly<Record<string, string | number | boolean>>;

/** Translates template keys of notification messages. */
export interface Translator {
  /** The key's text in `locale`, else English's; undefined when neither has it or a parameter it names is missing. */
  translate(key: string, locale: Locale, params?: Params): string | undefined;
  /**
   * The message as a channel of `locale` shows it: its `template_key`'s title and body from that
   * locale's catalog, else English's, filled with the message's (already scanned) parameters; a
   * template the catalogs do not know keeps the emitter's own text.
   */
  localize(message: Notification, locale: Locale): Notification;
}

/** A translator over `catalogs` (one i18next instance, initialised synchronously). */
export function createTranslator(catalogs: Record<Locale, PartialCatalog> = CATALOGS): Translator {
  const t: i18n = createInstance();
  void t.init({
    resources: Object.fromEntries(LOCALES.map((l) => [l, { translation: catalogs[l] }])),
    lng: "en",
    fallbackLng: "en",
    initAsync: false,
    // Plain text and markdown: the email channel escapes for HTML itself.
    interpolation: { escapeValue: false },
  });
  const translate = (key: string, locale: Locale, params: Params = {}) => {
    if (!t.exists(key, { lng: locale, ...params })) return undefined;
    const text = t.t(key, { lng: locale, ...params });
    // A parameter the template names but the message lacks: not a sentence to send.
    return text.includes("{{") ? undefined : text;
  };
  return {
    translate,
    localize(message, locale) {
      const params = message.params ?? {};
      const title = translate(`${message.template_key}.title`, locale, params);
      const body = translate(`${message.template_key}.body`, locale, params);
      if (title === undefined || body === undefined) return message;
      return { ...message, title, body_markdown: body };
    },
  };
}

let bundled: Translator | undefined;

/** The translator over the bundled catalogs, made on first use. */
export function translator(): Translator {
  bundled ??= createTranslator();
  return bundled;
}
