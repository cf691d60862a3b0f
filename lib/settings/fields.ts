import { z } from "zod";
import type { ProjectContext } from "../context";
import { notFound } from "../errors";
import {
  DEFAULT_SETTINGS,
  isPlain,
  projectEpisodicPatch,
  projectSemanticPatch,
  projectUsagePatch,
  projectWorkingPatch,
  resolveProjectSettings,
} from "./settings";
import { changeProjectSettings, storedSettings } from "./store";

/**
 * The settings form's fields: what each setting accepts is read from the zod schemas PATCH
 * validates with (as JSON Schema), so a bound is written once, in lib/settings/settings.ts.
 */
const GROUP_SCHEMAS = {
  working: projectWorkingPatch,
  episodic: projectEpisodicPatch,
  semantic: projectSemanticPatch,
  usage: projectUsagePatch,
} as const;

export type SettingGroup = keyof typeof GROUP_SCHEMAS;
export const SETTING_GROUPS = Object.keys(GROUP_SCHEMAS) as SettingGroup[];

type SettingValue = boolean | number | null;

export interface SettingField {
  group: SettingGroup;
  key: string;
  type: "boolean" | "integer" | "number";
  nullable: boolean;
  minimum: number | null;
  maximum: number | null;
  default: SettingValue;
  /** The merged value: the project's own when overridden, else the default. */
  value: SettingValue;
  /** The project stores its own value for this key. */
  overridden: boolean;
  description: string;
}

interface JsonSchema {
  type?: string;
  anyOf?: JsonSchema[];
  minimum?: number;
  maximum?: number;
  description?: string;
}

type FieldMeta = Omit<SettingField, "value" | "overridden">;

let fields: FieldMeta[] | undefined;

/**
 * Groups in order working, episodic, semantic, usage; keys in DEFAULT_SETTINGS order. Built on first
 * use, not at import: every Worker isolate loads this module, and the JSON Schema conversion
 * costs a few milliseconds that only the settings form needs.
 */
const settingMeta = (): FieldMeta[] =>
  (fields ??= SETTING_GROUPS.flatMap((group) => {
    const properties = (z.toJSONSchema(GROUP_SCHEMAS[group], { io: "input" }).properties ?? {}) as Record<
      string,
      JsonSchema
    >;
    return Object.entries(DEFAULT_SETTINGS[group]).map(([key, fallback]): FieldMeta => {
      const schema = properties[key];
      if (!schema) throw new Error(`setting ${group}.${key} has no schema`);
      const alternatives = schema.anyOf ?? [schema];
      const value = alternatives.find((s) => s.type !== "null");
      const type = value?.type;
      if (type !== "boolean" && type !== "integer" && type !== "number") {
        throw new Error(`setting ${group}.${key} has an unsupported type ${type}`);
      }
      return {
        group,
        key,
        type,
        nullable: alternatives.some((s) => s.type === "null"),
        minimum: value?.minimum ?? null,
        maximum: value?.maximum ?? null,
        default: fallback as SettingValue,
        description: schema.description ?? value?.description ?? "",
      };
    });
  }));

type Stored = Record<string, unknown>;

function isOverridden(stored: Stored, group: string, key: string): boolean {
  const own = stored[group];
  return isPlain(own) && Object.hasOwn(own, key);
}

/** Every field with the project's merged value and whether the project overrides it. */
export function settingFieldsOf(stored: Stored | null | undefined): SettingField[] {
  const merged = resolveProjectSettings(stored) as unknown as Record<string, Record<string, SettingValue>>;
  return settingMeta().map((f) => ({
    ...f,
    value: merged[f.group][f.key] ?? null,
    overridden: isOverridden(stored ?? {}, f.group, f.key),
  }));
}

/** GET .../settings/fields: one statement. */
export async function projectSettingFields({ deps, projectId }: ProjectContext): Promise<SettingField[]> {
  return settingFieldsOf(await storedSettings(deps, projectId));
}

/**
 * Removes the project's own value of one setting, so the default applies again; a key the
 * project does not override is left alone (one statement). Removing an override may break the
 * cross-field rule (a band floor whose own value was below a lowered dedup threshold): that is a
 * 400 and writes nothing, as PATCH does.
 */
export async function resetProjectSetting(
  { deps, projectId }: ProjectContext,
  { group, key }: { group: string; key: string },
): Promise<SettingField[]> {
  if (!settingMeta().some((f) => f.group === group && f.key === key)) throw notFound("Setting not found");
  const stored = await changeProjectSettings(deps, projectId, (current) => {
    if (!isOverridden(current, group, key)) return current;
    const { [key]: _removed, ...rest } = current[group] as Stored;
    const { [group]: _group, ...others } = current;
    return Object.keys(rest).length > 0 ? { ...others, [group]: rest } : others;
  });
  return settingFieldsOf(stored);
}
