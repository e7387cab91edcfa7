"""Operations on the whole store: sweep, audit, replay, verify, rebuild."""
