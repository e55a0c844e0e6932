def main() -> None:
    raise SystemExit("osmo CLI: not built yet")
