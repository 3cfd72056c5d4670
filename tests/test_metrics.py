"""Metric math against values computed by hand."""

from __future__ import annotations


import pytest

from e2e import metrics as m
from e2e.results.records import RequestRecord, SpecCounters


def rec(i, send, first, end, tokens, chunks=None, prompt=8, error=None):
    return RequestRecord(index=i, send_s=send, first_token_s=first, end_s=end,
                         chunk_times_s=tuple(chunks or ()), prompt_tokens=prompt,
                         completion_tokens=tokens, error=error)


def test_tpot_uses_usage_tokens_not_chunks():
    # 1.0 s latency, 0.1 s TTFT, 10 tokens in 3 chunks: (1.0 - 0.1) / (10 - 1) = 0.1 s
    r = rec(0, 0.0, 0.1, 1.0, 10, chunks=[0.1, 0.5, 1.0])
    assert m.request_tpot_s(r) == pytest.approx(0.1)


def test_tpot_undefined_for_one_token_and_failures():
    assert m.request_tpot_s(rec(0, 0.0, 0.1, 0.2, 1)) is None
    assert m.request_tpot_s(rec(0, 0.0, 0.1, None, 5, error="boom")) is None


def test_summary_by_hand():
    records = [
        # TTFT 0.2, e2e 2.2, TPOT (2.2-0.2)/4 = 0.5
        rec(0, 0.0, 0.2, 2.2, 5, chunks=[0.2, 0.7, 1.2, 1.7, 2.2]),
        # TTFT 0.4, e2e 1.4, TPOT (1.4-0.4)/4 = 0.25
        rec(1, 1.0, 1.4, 2.4, 5, chunks=[1.4, 2.4]),
    ]
    s = m.summarize_run(records)
    assert s.requests == 2 and s.ok_requests == 2
    assert s.ttft_ms_mean == pytest.approx(300.0)
    assert s.ttft_ms_median == pytest.approx(300.0)
    assert s.tpot_ms_mean == pytest.approx(375.0)
    assert s.tpot_ms_median == pytest.approx(375.0)
    # p99 by linear interpolation between 250 and 500: 250 + 0.99 * 250
    assert s.tpot_ms_p99 == pytest.approx(497.5)
    # inter-chunk gaps: 0.5 x4 from the first, 1.0 from the second -> mean 0.6 s
    assert s.itl_ms_mean == pytest.approx(600.0)
    assert s.e2el_ms_mean == pytest.approx(1800.0)
    # duration: first send 0.0 to last end 2.4; 10 tokens
    assert s.duration_s == pytest.approx(2.4)
    assert s.output_throughput_tok_s == pytest.approx(10 / 2.4)
    assert s.request_throughput_req_s == pytest.approx(2 / 2.4)
    assert s.acceptance_length is None and s.ms_per_verify_step is None


def test_a_run_in_windows_lasts_its_windows_not_the_wait_between_them():
    # two windows of two requests; between them the side waited 5 s for its duet partner
    records = [rec(0, 0.0, 0.1, 1.0, 10), rec(1, 0.0, 0.1, 2.0, 10),
               rec(2, 7.0, 7.1, 8.0, 10), rec(3, 7.0, 7.1, 9.0, 10)]
    windowed = m.summarize_run(records, per_window=2)
    assert windowed.duration_s == pytest.approx(4.0)  # 2 s + 2 s
    assert windowed.output_throughput_tok_s == pytest.approx(40 / 4.0)
    assert windowed.request_throughput_req_s == pytest.approx(4 / 4.0)
    assert m.summarize_run(records).duration_s == pytest.approx(9.0)  # one span, wait included
    assert m.summarize_run(records[:2], per_window=2).duration_s == pytest.approx(2.0)


def test_failed_requests_are_not_averaged():
    records = [rec(0, 0.0, 0.2, 2.2, 5), rec(1, 0.0, 0.3, None, None, error="reset")]
    s = m.summarize_run(records)
    assert s.requests == 2 and s.ok_requests == 1
    assert s.tpot_ms_mean == pytest.approx(500.0)


def test_acceptance_and_ms_per_verify_step():
    before = SpecCounters(accepted=100, drafts=50, draft_tokens=150)
    after = SpecCounters(accepted=400, drafts=250, draft_tokens=750)
    length, rate = m.acceptance(before, after)
    assert length == pytest.approx(1 + 300 / 200)  # 2.5
    assert rate == pytest.approx(300 / 600)
    s = m.summarize_run([rec(0, 0.0, 0.2, 2.2, 5)], counters_before=before, counters_after=after)
    assert s.ms_per_verify_step == pytest.approx(500.0 * 2.5)


def test_acceptance_undefined_when_no_drafts():
    same = SpecCounters(accepted=3, drafts=2, draft_tokens=6)
    assert m.acceptance(same, same) == (None, None)


METRICS = """\
# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 266.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 34.0
# HELP vllm:spec_decode_num_accepted_tokens Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 673.0
# HELP vllm:request_time_per_output_token_seconds Histogram of TPOT.
# TYPE vllm:request_time_per_output_token_seconds histogram
vllm:request_time_per_output_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 3.0
vllm:request_time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:request_time_per_output_token_seconds_count{engine="0",model_name="m"} 4.0
vllm:request_time_per_output_token_seconds_sum{engine="0",model_name="m"} 0.02
"""


def test_prometheus_counters_are_summed_over_engines():
    c = m.spec_counters(METRICS)
    assert c.drafts == 300.0 and c.accepted == 673.0 and c.draft_tokens == 0.0


def test_server_tpot_from_histogram_delta():
    after = METRICS.replace("_count{engine=\"0\",model_name=\"m\"} 4.0",
                            "_count{engine=\"0\",model_name=\"m\"} 6.0").replace(
        "_sum{engine=\"0\",model_name=\"m\"} 0.02", "_sum{engine=\"0\",model_name=\"m\"} 0.03")
    assert m.histogram_mean_delta(METRICS, after, m.SERVER_TPOT) == pytest.approx(0.005)
    assert m.histogram_mean_delta(METRICS, METRICS, m.SERVER_TPOT) is None


def test_validity_reasons():
    good = [rec(i, 0, 0.1, 1, 5, prompt=8) for i in range(3)]
    assert m.validity_reasons(good, input_len=8, output_len=5, expected=3) == []
    short = good[:2] + [rec(2, 0, 0.1, 1, 4, prompt=8)]
    assert any("other than 5 tokens" in r for r in
               m.validity_reasons(short, input_len=8, output_len=5, expected=3))
    wrong_prompt = good[:2] + [rec(2, 0, 0.1, 1, 5, prompt=9)]
    assert any("prompt of other than 8" in r for r in
               m.validity_reasons(wrong_prompt, input_len=8, output_len=5, expected=3))
    assert any("2 of 3" in r for r in
               m.validity_reasons(good[:2], input_len=8, output_len=5, expected=3))
    failed = good[:2] + [rec(2, 0, 0.1, None, None, error="reset")]
    reasons = m.validity_reasons(failed, input_len=8, output_len=5, expected=3)
    assert any("1 request(s) failed" in r and "reset" in r for r in reasons)


def test_a_hold_between_windows_is_taken_out_of_the_servers_counters():
    # 10 measured requests of 4 ms, then a hold's 2 requests of 9 ms between the scrapes
    before = {"h_count": 5.0, "h_sum": 0.02}
    hold_start = {"h_count": 10.0, "h_sum": 0.04}
    hold_end = {"h_count": 12.0, "h_sum": 0.058}
    after = {"h_count": 17.0, "h_sum": 0.078}
    assert m.histogram_mean_delta(before, after, "h") == pytest.approx(0.058 / 12)  # polluted
    clean = m.without_holds(after, [(hold_start, hold_end)])
    assert m.histogram_mean_delta(before, clean, "h") == pytest.approx(0.004)
    assert clean["h_count"] - before["h_count"] == 10


def test_a_hold_is_taken_out_of_the_speculators_counters_per_position():
    c = lambda a, d, pos: SpecCounters(accepted=a, drafts=d, draft_tokens=3 * d,
                                       accepted_per_pos=pos)
    before, after = c(0, 0, []), c(30, 20, [15, 10, 5])
    hold = (c(10, 5, [5, 3, 2]), c(20, 10, [10, 6, 4]))  # the hold drafted 5, accepted 10
    clean = m.counters_without_holds(after, [hold])
    assert (clean.accepted, clean.drafts, clean.draft_tokens) == (20, 15, 45)
    assert clean.accepted_per_pos == [10, 7, 3]
    assert m.acceptance(before, clean)[0] == pytest.approx(1 + 20 / 15)
