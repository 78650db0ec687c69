-- Parity judged in a numerics profile: the profile, the activation rows, the per-element rule
-- (atol + rtol * sum|terms|), how close the case came to it, and NMSE against the exact product.
ALTER TABLE parity_cases ADD COLUMN numerics TEXT NOT NULL DEFAULT 'qgate';     -- qgate|ggml
ALTER TABLE parity_cases ADD COLUMN activation TEXT NOT NULL DEFAULT 'random';  -- random|zero|outlier|tiny|ties|large
ALTER TABLE parity_cases ADD COLUMN atol REAL;
ALTER TABLE parity_cases ADD COLUMN rtol REAL;
ALTER TABLE parity_cases ADD COLUMN worst_tolerance_fraction REAL;
ALTER TABLE parity_cases ADD COLUMN max_rel_diff REAL;
ALTER TABLE parity_cases ADD COLUMN exact_nmse REAL;
ALTER TABLE parity_cases ADD COLUMN exact_nmse_limit REAL;
ALTER TABLE parity_cases ADD COLUMN weights_source TEXT NOT NULL DEFAULT 'seeded';
