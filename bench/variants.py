"""What making a Simplified answer Traditional costs: OpenCC ``s2twp`` on a 1,000-character answer
(Simplified, already Traditional, and mixed with code and URLs), median of ``--runs`` (200).

    python bench/variants.py [--runs 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from knowledge.answer.variants import traditional  # noqa: E402

ANSWERS = {
    "Simplified": "这个文件说明了网络设置和服务器的数据，下载以后请删除旧的软件 [1]。\n" * 28,
    "Traditional": "這個檔案說明了網路設定和伺服器的資料，下載以後請刪除舊的軟體 [1]。\n" * 28,
    "mixed": ("用 `git pull` 下载代码，见 https://example.org/docs 与 Linus Torvalds 的说明 [2]。\n" * 20)[
        :1000
    ],
}
TARGET_MS = 1.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    for name, answer in ANSWERS.items():
        answer = answer[:1000]
        traditional(answer)  # OpenCC's dictionaries are loaded once
        times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            traditional(answer)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"{name:12} {len(answer)} characters: median {statistics.median(times):.3f} ms, "
              f"p95 {sorted(times)[int(0.95 * len(times))]:.3f} ms (target < {TARGET_MS:g} ms)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
