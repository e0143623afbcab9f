"""The Start here page's sentences, every number passed in from the first look (`first_look.FirstLook`)."""

from __future__ import annotations

from inference.lessons.start.first_look import FirstLook, SeededDraw


def percent(p: float) -> str:
    """A probability readable at any size: 43.0%, 0.012% (a rare draw must not read 0.0%)."""
    return f"{p:.1%}" if p >= 0.001 else f"{p * 100:.2g}%"


def chip(token: str) -> str:
    """A readable token as inline code (a backtick inside it would end the code span)."""
    return f"`{token.replace('`', 'ˋ')}`"


def _draw_line(d: SeededDraw, half_within: int, half_mass: float) -> str:
    how_rare = (
        f"{'the most likely token' if half_within == 1 else f'among the {half_within} most likely'}, where "
        f"{percent(half_mass)} of all draws land"
        if d.rank <= half_within
        else f"{percent(d.this_far_down)} of draws land this far down the list or further (one in {d.one_in:,})"
    )
    return f"- seed {d.seed}: u = {d.u:.3f} → {chip(d.token)} ({percent(d.probability)}, rank {d.rank:,}): {how_rare}"


def choosing(look: FirstLook, temperature: float) -> str:
    """Step 3: greedy against a few seeded draws, with how usual each draw is, computed from the distribution."""
    half = look.half_of_draws_within
    typical = sum(d.rank <= half for d in look.draws)
    held = percent(look.half_mass)
    most_likely = "most likely token holds" if half == 1 else f"{half} most likely tokens hold"
    fewer = (
        ", at least half"
        if half == 1
        else f" (the top {'one' if half == 2 else half - 1} alone {'holds' if half == 2 else 'hold'} "
        f"{percent(look.short_of_half_mass)}: {half} is the fewest top tokens where half of all draws land)"
    )
    lines = "\n".join(_draw_line(d, half, look.half_mass) for d in look.draws)
    rarest = max(look.draws, key=lambda d: d.rank)
    rarest_line = (
        f" The rarest, seed {rarest.seed}'s, reaches rank {rarest.rank:,}: about one draw in {rarest.one_in:,} goes "
        "that far down."
        if rarest.rank > half
        else ""
    )
    return (
        f"Greedy decoding always takes the top token, {chip(look.greedy_token)} ({percent(look.greedy_probability)}). "
        "Sampling draws a number u between 0 and 1 from the run's seed and takes the token where the running total "
        f"of the probabilities, most likely first, passes u. At temperature {temperature:g} the {most_likely} "
        f"{held} of the probability{fewer}; {len(look.draws)} seeds drew:\n\n{lines}\n\n"
        f"{typical} of these {len(look.draws)} draws landed "
        f"{'on the top token' if half == 1 else f'among the top {half}'}, as {held} of all draws do on average."
        f"{rarest_line} The chosen token is appended and the loop starts again."
    )
