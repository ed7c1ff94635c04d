import type { HitDetail } from "../api.js";
import { formatCount } from "../format.js";
import { ScrollRegion } from "../ui.js";
import { alignmentBlocks, blockText, hspOrientation, hspStatistics } from "./alignment.js";
import { formatEvalue } from "./hit-table.js";

/**
 * One hit's alignments, as NCBI's pairwise view: the subject's title, accession and length, then
 * per HSP its score, e-value, identities/positives/gaps, strand or frame, and the query, match
 * line and subject in blocks of 60 with the coordinates of each line.
 */
export function AlignmentView(props: { detail: HitDetail; onClose: () => void }) {
  const { detail } = props;
  const { hit, program } = detail;
  const headingId = `alignment-${detail.query.n}-${hit.num}`;
  return (
    <section class="alignment" aria-labelledby={headingId}>
      <h4 id={headingId} tabIndex={-1}>
        Alignments of hit {hit.num}: {hit.accession || hit.id}
      </h4>
      <p class="alignment-title">{hit.title || hit.id}</p>
      <p class="muted">
        Sequence ID {hit.id}, length {formatCount(hit.len)}, {hit.hsps} {hit.hsps === 1 ? "alignment" : "alignments"}
      </p>
      {detail.hsp_list.map((hsp) => {
        const orientation = hspOrientation(hsp);
        return (
          <div key={hsp.num} class="hsp">
            <h5>
              Range {hsp.num}: {formatCount(hsp.hit_from)} to {formatCount(hsp.hit_to)}
            </h5>
            <dl class="hsp-stats">
              <dt>Score</dt>
              <dd>
                {hsp.bit_score} bits ({hsp.score})
              </dd>
              <dt>Expect</dt>
              <dd>{formatEvalue(hsp.evalue)}</dd>
              {hspStatistics(program, hsp).map((s) => {
                const [name, ...rest] = s.split(" ");
                return [<dt key={`${name}-t`}>{name}</dt>, <dd key={`${name}-d`}>{rest.join(" ")}</dd>];
              })}
              {orientation ? (
                <>
                  <dt>{orientation.split(" ")[0]}</dt>
                  <dd>{orientation.split(" ").slice(1).join(" ")}</dd>
                </>
              ) : null}
            </dl>
            <ScrollRegion label={`Alignment ${hsp.num} of hit ${hit.num}`}>
              <pre class="alignment-text">{alignmentBlocks(program, hsp).map(blockText).join("\n\n")}</pre>
            </ScrollRegion>
          </div>
        );
      })}
      <button type="button" onClick={props.onClose}>
        Close the alignments
      </button>
    </section>
  );
}
