import { useState } from "preact/hooks";
import { DATABASE_NAME } from "../../../shared/blast/database-name.js";
import type { MoleculeType } from "../../../shared/blast/programs.js";
import { moleculeWord, sizeFromSample, suggestPartitions } from "../../../shared/blast/sequence-kind.js";
import { ApiError, type DatabaseAdding, type Operation } from "../api.js";
import { formatBytes, formatCount } from "../format.js";
import { ErrorNotice, Field, fieldAria, useApp } from "../ui.js";

/** Bytes of a file the page reads to tell its molecule and size before uploading it. */
const SAMPLE_BYTES = 1024 * 1024;

/** What the page read from the chosen file. */
interface Chosen {
  file: File;
  detected: MoleculeType | undefined;
  sequences: number;
  letters: number;
  headerBytes: number;
  exact: boolean;
}

/** A database name from a file name: its stem, with what a name may not hold replaced. */
function nameFromFile(fileName: string): string {
  const stem = fileName.replace(/\.(fa|fasta|fna|faa|fas|ffn|txt)$/i, "");
  return stem
    .replace(/[^A-Za-z0-9._-]/g, "_")
    .replace(/^[._-]+/, "")
    .slice(0, 64);
}

/**
 * "Add a database": a FASTA file is read (its first MiB) to tell nucleotide from protein and to
 * suggest partitions from its size and the nodes' memory; the researcher confirms both, and the
 * file streams to the API, which starts the build as an operation (`onStarted`).
 */
export function DatabaseUpload(props: {
  adding: DatabaseAdding | undefined;
  onStarted: (name: string, operation: Operation) => void;
}) {
  const { api } = useApp();
  const [chosen, setChosen] = useState<Chosen | undefined>(undefined);
  const [name, setName] = useState("");
  const [type, setType] = useState<MoleculeType>("nucl");
  const [partitions, setPartitions] = useState("0");
  const [issues, setIssues] = useState<Record<string, string[]>>({});
  const [error, setError] = useState<unknown>(undefined);
  const [uploading, setUploading] = useState(false);

  const maxBytes = props.adding?.upload.max_bytes ?? 0;
  const usable = props.adding?.node?.usable_bytes ?? null;
  const advice = chosen
    ? suggestPartitions(
        { molecule: type, letters: chosen.letters, sequences: chosen.sequences, headerBytes: chosen.headerBytes },
        usable,
      )
    : undefined;

  const onFile = async (event: Event) => {
    const file = (event.currentTarget as HTMLInputElement).files?.[0];
    setIssues({});
    setError(undefined);
    if (!file) return setChosen(undefined);
    const sample = await file.slice(0, SAMPLE_BYTES).text();
    const size = sizeFromSample(sample, file.size);
    const detected = size.letters > 0 ? size.molecule : undefined;
    setChosen({
      file,
      detected,
      sequences: size.sequences,
      letters: size.letters,
      headerBytes: size.headerBytes,
      exact: size.exact,
    });
    if (detected) setType(detected);
    if (!name) setName(nameFromFile(file.name));
    const suggested = suggestPartitions({ ...size, molecule: detected ?? type }, usable);
    setPartitions(String(suggested.partitions));
  };

  const tooLarge = chosen !== undefined && maxBytes > 0 && chosen.file.size > maxBytes;
  const nameIssue =
    name && !DATABASE_NAME.test(name)
      ? "a database name has 1 to 64 letters, digits, '.', '_' or '-' and starts with a letter or digit"
      : undefined;

  const onSubmit = async (event: Event) => {
    event.preventDefault();
    if (!chosen) return;
    setIssues({});
    setError(undefined);
    setUploading(true);
    try {
      const started = await api.uploadDatabase(chosen.file, { name, type, partitions: Number(partitions) || 0 });
      props.onStarted(name, started.operation);
      setChosen(undefined);
      setName("");
      (document.getElementById("upload-file") as HTMLInputElement | null)?.form?.reset();
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 422) {
        const byField: Record<string, string[]> = {};
        for (const issue of failure.issues) {
          const key = issue.loc[0] === "query" ? String(issue.loc[1]) : "file";
          byField[key] = [...(byField[key] ?? []), issue.msg];
        }
        setIssues(byField);
      } else setError(failure);
    } finally {
      setUploading(false);
    }
  };

  const fileError =
    issues.file?.join(" ") ??
    (tooLarge
      ? `The file is ${formatBytes(chosen.file.size)}; the upload limit is ${formatBytes(maxBytes)}. Add it with 'npx blastplane db add' instead.`
      : undefined);
  const nameError = issues.name?.join(" ") ?? nameIssue;
  const typeError = issues.type?.join(" ");
  const partitionsError = issues.partitions?.join(" ");
  const unavailable = props.adding && !props.adding.upload.available ? props.adding.upload.reason : null;

  return (
    <form class="form" onSubmit={onSubmit} noValidate aria-labelledby="add-database-heading">
      <h2 id="add-database-heading">Add a database from a FASTA file</h2>
      <p class="muted">
        The file goes to the service, which builds the database with makeblastdb; you can follow the build below.
        {maxBytes > 0 ? ` Files up to ${formatBytes(maxBytes)}.` : ""}
      </p>
      {unavailable ? (
        <p class="notice" role="note">
          Uploads are not available: {unavailable}
        </p>
      ) : null}
      <Field id="upload-file" label="FASTA file" error={fileError}>
        <input
          id="upload-file"
          type="file"
          accept=".fa,.fasta,.fna,.faa,.fas,.ffn,.txt,text/plain"
          onChange={onFile}
          {...fieldAria("upload-file", fileError)}
        />
      </Field>
      {chosen ? (
        <>
          <p class="hint" id="upload-summary" role="status">
            {formatBytes(chosen.file.size)}, {chosen.exact ? "" : "about "}
            {formatCount(chosen.sequences)} {chosen.sequences === 1 ? "sequence" : "sequences"},{" "}
            {formatCount(chosen.letters)} letters.{" "}
            {chosen.detected
              ? `The letters look like ${moleculeWord(chosen.detected)}.`
              : "No sequence letters were found at the start of the file."}
          </p>
          <div class="grid-2">
            <Field id="upload-name" label="Database name" error={nameError}>
              <input
                id="upload-name"
                type="text"
                value={name}
                maxLength={64}
                onInput={(e) => setName(e.currentTarget.value)}
                {...fieldAria("upload-name", nameError)}
              />
            </Field>
            <Field
              id="upload-partitions"
              label="Partitions"
              hint={advice ? `Suggested ${advice.partitions}: ${advice.reason}.` : undefined}
              error={partitionsError}
            >
              <input
                id="upload-partitions"
                type="number"
                min={0}
                max={64}
                value={partitions}
                onInput={(e) => setPartitions(e.currentTarget.value)}
                {...fieldAria("upload-partitions", partitionsError, advice !== undefined)}
              />
            </Field>
          </div>
          <fieldset class={`choices${typeError ? " field-invalid" : ""}`}>
            <legend>Sequence type</legend>
            {(["nucl", "prot"] as const).map((t) => (
              <label key={t}>
                <input type="radio" name="upload-type" value={t} checked={type === t} onChange={() => setType(t)} />
                <span>
                  <strong>{moleculeWord(t) === "nucleotide" ? "Nucleotide" : "Protein"}</strong>
                  {chosen.detected === t ? " — detected from the sequence letters" : ""}
                </span>
              </label>
            ))}
            {typeError ? <p class="field-error">{typeError}</p> : null}
          </fieldset>
          <ErrorNotice error={error} title="The database was not added:" />
          <div class="actions">
            <button
              type="submit"
              class="primary"
              disabled={uploading || tooLarge || !name || nameIssue !== undefined || unavailable !== null}
            >
              {uploading ? "Uploading…" : `Add ${moleculeWord(type)} database`}
            </button>
          </div>
        </>
      ) : null}
    </form>
  );
}
