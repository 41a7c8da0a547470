"""A picture of the training curves, `training_curves.png`, written with a job's outputs so
that a user can look at them without TensorBoard.

One panel per curve: the mean loss per epoch, then each evaluation metric per model version,
from the report's `history` (report.history_section). Drawn with Pillow, which comes with
every install (a dependency of tensorboard); `series` is pure and tested on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FILE_NAME = "training_curves.png"
WIDTH, PANEL_HEIGHT = 720, 240
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 70, 20, 28, 34
COLORS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189), (255, 127, 14)]


def series(history: dict[str, Any]) -> list[tuple[str, str, list[tuple[float, float]]]]:
    """(title, x-axis name, points) per curve: loss per epoch (1-based), each metric per
    model version. Curves with no point are left out."""
    found = []
    epochs = [(e["epoch"] + 1.0, float(e["loss"])) for e in history.get("epochs", [])]
    if epochs:
        found.append(("loss (mean per epoch)", "epoch", epochs))
    names: list[str] = []
    for evaluation in history.get("evaluation", []):
        names += [n for n in evaluation["metrics"] if n not in names]
    for name in names:
        points = [
            (float(e["model_version"]), float(e["metrics"][name]))
            for e in history.get("evaluation", [])
            if name in e["metrics"]
        ]
        found.append((f"eval {name}", "model version", points))
    return found


def _ticks(low: float, high: float) -> tuple[float, float]:
    if high - low < 1e-12:
        pad = abs(low) * 0.05 or 1.0
        return low - pad, high + pad
    pad = (high - low) * 0.05
    return low - pad, high + pad


def write_png(history: dict[str, Any], path: Path) -> Path | None:
    """Draw the curves of `history` into `path`; None (nothing written) when there is none."""
    from PIL import Image, ImageDraw, ImageFont

    curves = series(history)
    if not curves:
        return None
    image = Image.new("RGB", (WIDTH, PANEL_HEIGHT * len(curves)), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    for index, (title, x_name, points) in enumerate(curves):
        top = index * PANEL_HEIGHT
        left, right = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
        upper, lower = top + MARGIN_TOP, top + PANEL_HEIGHT - MARGIN_BOTTOM
        xs, ys = [p[0] for p in points], [p[1] for p in points]
        x0, x1 = _ticks(min(xs), max(xs))
        y0, y1 = _ticks(min(ys), max(ys))

        def at(x: float, y: float) -> tuple[float, float]:
            return (
                left + (x - x0) / (x1 - x0) * (right - left),  # noqa: B023 - drawn at once
                lower - (y - y0) / (y1 - y0) * (lower - upper),  # noqa: B023
            )

        draw.rectangle([left, upper, right, lower], outline=(120, 120, 120))
        draw.text((left, top + 8), title, fill="black", font=font)
        draw.text((4, upper), f"{max(ys):.4g}", fill="black", font=font)
        if max(ys) > min(ys):
            draw.text((4, lower - 10), f"{min(ys):.4g}", fill="black", font=font)
        # The x labels stand under the first and the last point.
        first = f"{x_name} {min(xs):g}"
        first_at = at(min(xs), y0)[0] - draw.textlength(f"{x_name} ", font=font)
        draw.text((max(left, first_at), lower + 6), first, fill="black", font=font)
        if max(xs) > min(xs):
            last = f"{max(xs):g}"
            last_at = at(max(xs), y0)[0] - draw.textlength(last, font=font) / 2
            draw.text((last_at, lower + 6), last, fill="black", font=font)
        color = COLORS[index % len(COLORS)]
        pixels = [at(x, y) for x, y in points]
        if len(pixels) > 1:
            draw.line(pixels, fill=color, width=2)
        for px, py in pixels:
            draw.ellipse([px - 3, py - 3, px + 3, py + 3], fill=color)
    image.save(path, format="PNG")
    return path
