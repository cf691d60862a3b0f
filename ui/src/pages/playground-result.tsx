import type { Schemas } from "../api/client";
import type { paths } from "../api/schema";
import { CopyButton } from "../components/copy-button";
import { formatDate, formatDateTime, formatNumber } from "../lib/format";
import { formatPredicate } from "../lib/predicate";
import { missingSynthesis } from "../lib/synthesis";

/** The playground's answer: the /v1 recall response plus how it was ranked and timed. */
type Answer = paths["/dashboard/projects/{id}/recall"]["post"]["responses"][200]["content"]["application/json"];

const MODES: Record<Answer["mode"], string> = {
  hybrid:
    "Hybrid: each candidate scored by cosine similarity, keyword match (BM25), the entities the query names and the time it names, weighted and summed.",
  keyword:
    "Keyword: the query could not be embedded, so keyword, entity and time scores without cosine; the newest facts follow the matches. Correct but ranked more weakly.",
  recent: "Recent: no query, so the most recent live facts by validAt, each scored 1; nothing was embedded.",
};

const score = (n: number | null | undefined) => (n === null || n === undefined ? "—" : n.toFixed(3));

const RERANK: Record<NonNullable<Answer["rerank"]>, string> = {
  reranked: "The reranker reordered the best candidates.",
  timeout: "The reranker did not answer in time: the fused order was kept.",
  failed: "The reranker failed: the fused order was kept (see the server log).",
  skipped: "The reranker had fewer than two candidates to reorder.",
};
/** A numeric column's header. */
const Num = ({ children }: { children: string }) => (
  <th scope="col" class="num">
    {children}
  </th>
);

const ms = (n: number) => `${n < 10 ? n.toFixed(1) : formatNumber(Math.round(n))} ms`;

export function RecallResult({
  body,
  request,
  roundTripMs,
}: {
  body: Answer;
  request: Schemas["RecallRequest"];
  roundTripMs: number;
}) {
  const { recall, mode, signals, messageSignals, rerank, timing } = body;
  const signalsOf = new Map(signals.map((r) => [r.factId, r]));
  const messageSignalsOf = new Map(messageSignals.map((r) => [r.messageId, r]));
  const facts = recall.facts ?? [];
  const serverMs = timing.reduce((sum, t) => sum + t.ms, 0);
  const empty = recall.context === "";
  return (
    <section class="recall-result" aria-labelledby="recall-result-title">
      <h3 id="recall-result-title">Result</h3>
      <p class="recall-summary" role="status">
        <strong>
          {formatNumber(recall.factCount)} fact{recall.factCount === 1 ? "" : "s"}
          {recall.messages
            ? ` and ${formatNumber(recall.messages.length)} message${recall.messages.length === 1 ? "" : "s"}`
            : ""}
        </strong>{" "}
        in the block for <code>{request.dataset}</code>
        {request.query ? (
          <>
            {" "}
            for “<span class="wrap-anywhere">{request.query}</span>”
          </>
        ) : (
          " (no query)"
        )}
        {request.asOf ? ` as of ${formatDateTime(request.asOf)}` : ""}.
      </p>
      <p class="recall-mode">
        <span class="badge muted">{mode}</span> {MODES[mode]}
        {rerank ? ` ${RERANK[rerank]}` : ""}
      </p>

      <h4>Context block</h4>
      {empty ? (
        <p class="notice nothing-matched">
          <strong>Nothing matched.</strong> The context block is empty: no live fact of this dataset passed the minimum
          confidence{request.query ? " or matched the query" : ""}
          {recall.messages ? ", and no indexed message matched" : ""}
          {request.asOf ? " at that time" : ""}. The model would get no memory.
        </p>
      ) : (
        <>
          {/* biome-ignore lint/a11y/useAriaPropsSupportedByRole: the block's name, for finding it (tests, assistive technology) */}
          <pre aria-label="Context block" class="context-block">
            {recall.context}
          </pre>
          <div class="context-actions">
            <CopyButton text={recall.context} label="Copy context block" />
          </div>
        </>
      )}

      {facts.length > 0 && (
        <>
          <p class="hint" id="ranked-facts-hint">
            Each signal's value for the fact before its weight, — when that signal did not run
            {mode === "keyword" ? " (the newest facts follow the matches)" : ""}. Score: the signals times their weights
            (the project's recall settings), summed.
          </p>
          <div class="table-wrap">
            <table class="ranked" aria-describedby="ranked-facts-hint">
              <caption>Ranked facts</caption>
              <thead>
                <tr>
                  <Num>Rank</Num>
                  <th scope="col">Fact</th>
                  <Num>Cosine</Num>
                  <Num>Keyword</Num>
                  <Num>Entity</Num>
                  <Num>Time</Num>
                  <Num>Score</Num>
                  <Num>Confidence</Num>
                  <th scope="col">Validity</th>
                </tr>
              </thead>
              <tbody>
                {facts.map((f, i) => {
                  const r = signalsOf.get(f.factId) ?? signals[i];
                  return (
                    <tr key={f.factId}>
                      <td class="num">{i + 1}</td>
                      <td class="ranked-fact">
                        {f.subject} <span title={f.predicate}>{formatPredicate(f.predicate)}</span> {f.object}
                        <details class="quote-inline">
                          <summary title={f.sourceQuote}>
                            Source quote<span class="visually-hidden"> of fact {i + 1}</span>
                          </summary>
                          <blockquote>“{f.sourceQuote}”</blockquote>
                        </details>
                      </td>
                      <td class="num mono">{score(r?.vector)}</td>
                      <td class="num mono">{score(r?.keyword)}</td>
                      <td class="num mono">{score(r?.entity)}</td>
                      <td class="num mono">{score(r?.time)}</td>
                      <td class="num mono">{(r?.fused ?? f.relevanceScore ?? 0).toFixed(4)}</td>
                      <td class="num">{f.confidence.toFixed(2)}</td>
                      <td class="nowrap">
                        {formatDate(f.validAt)} – {f.validUntil ? formatDate(f.validUntil) : "present"}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </div>
        </>
      )}

      {recall.messages !== null && (
        <div class="recall-messages">
          <h4>Conversation evidence</h4>
          {recall.messages.length === 0 ? (
            <p class="hint">
              No indexed message matched (the user's messages; the assistant's if the project indexes them).
            </p>
          ) : (
            <>
              <p class="hint" id="ranked-messages-hint">
                The dataset's messages that best match, as rendered after the facts (those a returned fact quotes are
                left out). Cosine is — until the message is embedded, seconds after its thread's last write. Entity is 1
                when the message names an entity of the facts' second hop. Score: the signals times the facts' weights,
                summed.
              </p>
              <div class="table-wrap">
                <table class="ranked" aria-describedby="ranked-messages-hint">
                  <caption>Ranked messages</caption>
                  <thead>
                    <tr>
                      <Num>Rank</Num>
                      <th scope="col">Role</th>
                      <th scope="col">Written</th>
                      <th scope="col">Message</th>
                      <Num>Cosine</Num>
                      <Num>Keyword</Num>
                      <Num>Entity</Num>
                      <Num>Time</Num>
                      <Num>Score</Num>
                    </tr>
                  </thead>
                  <tbody>
                    {recall.messages.map((m, i) => {
                      const r = messageSignalsOf.get(m.messageId);
                      return (
                        <tr key={m.messageId}>
                          <td class="num">{i + 1}</td>
                          <td>{m.role}</td>
                          <td class="nowrap">{formatDateTime(m.createdAt)}</td>
                          <td class="ranked-message wrap-anywhere" title={`${m.messageId} in ${m.threadId}`}>
                            {m.content}
                          </td>
                          <td class="num mono">{score(r?.vector)}</td>
                          <td class="num mono">{score(r?.keyword)}</td>
                          <td class="num mono">{score(r?.entity)}</td>
                          <td class="num mono">{score(r?.time)}</td>
                          <td class="num mono">{(r?.fused ?? m.relevanceScore).toFixed(4)}</td>
                        </tr>
                      );
                    })}
                  </tbody>
                </table>
              </div>
            </>
          )}
        </div>
      )}

      {recall.synthesis !== null || request.include.includes("synthesis") ? (
        <div class="recall-synthesis">
          <h4>Synthesis</h4>
          {recall.synthesis ? (
            <p class="card synthesis">{recall.synthesis}</p>
          ) : (
            <p class="hint">{missingSynthesis(empty, timing)}</p>
          )}
        </div>
      ) : null}

      {recall.episodes !== null || request.include.includes("episodes") ? (
        <div class="recall-episodes">
          <h4>Episodes</h4>
          {recall.episodes === null ? (
            <p class="hint">None: the episodes could not be read (recall still answered).</p>
          ) : recall.episodes.episodes.length === 0 ? (
            <p class="hint">No completed episodes in this dataset.</p>
          ) : (
            <>
              <p class="hint">
                The top {formatNumber(recall.episodes.episodes.length)} of {formatNumber(recall.episodes.episodeCount)}{" "}
                completed episodes (contextEpisodes). They are returned beside the block, never rendered into it.
              </p>
              <ol class="card-list">
                {recall.episodes.episodes.map((e) => (
                  <li key={e.episodeId} class="card recall-episode">
                    <p class="hint">
                      <code title={e.episodeId}>{e.episodeId}</code> · {formatDateTime(e.startedAt)} –{" "}
                      {formatDateTime(e.endedAt)} · relevance <span class="mono">{e.relevanceScore.toFixed(4)}</span>
                    </p>
                    <p>{e.summary}</p>
                    {e.keyLearnings.length > 0 && (
                      <details>
                        <summary>Key learnings ({e.keyLearnings.length})</summary>
                        <ul>
                          {e.keyLearnings.map((k, i) => (
                            <li key={i}>{k}</li>
                          ))}
                        </ul>
                      </details>
                    )}
                  </li>
                ))}
              </ol>
            </>
          )}
        </div>
      ) : null}

      <div class="recall-timing">
        <h4>Timing</h4>
        <dl class="timing" aria-label="Timing">
          {timing.map((t) => (
            <div key={t.name}>
              <dt>{t.name}</dt>
              <dd>{ms(t.ms)}</dd>
            </div>
          ))}
          <div class="timing-total">
            <dt>total (server)</dt>
            <dd>{ms(serverMs)}</dd>
          </div>
          <div>
            <dt>round trip</dt>
            <dd>{ms(roundTripMs)}</dd>
          </div>
          <div>
            <dt>facts</dt>
            <dd>{formatNumber(recall.factCount)}</dd>
          </div>
        </dl>
      </div>
    </section>
  );
}
