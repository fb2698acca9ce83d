-- leadrelay schema, migration 34: the stamp of migration 31 also moves with every change of
-- what ingest reads of a workspace's products: a product's row, and whether a subscription
-- to it prices by bid (the only thing of a subscription a product's record carries), so
-- that ingest keeps each workspace's products with its sources (`ingest::kept`).
-- IF NOT EXISTS: running the migration again must not fail.
CREATE TRIGGER IF NOT EXISTS source_stamp_product_insert AFTER INSERT ON products
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_product_update AFTER UPDATE ON products
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_product_delete AFTER DELETE ON products
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_bid_subscription_insert AFTER INSERT ON subscriptions
WHEN NEW.pricing = 'bid'
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_bid_subscription_update
AFTER UPDATE OF pricing, product_id ON subscriptions
WHEN (OLD.pricing = 'bid') IS NOT (NEW.pricing = 'bid')
    OR (NEW.pricing = 'bid' AND OLD.product_id IS NOT NEW.product_id)
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_bid_subscription_delete AFTER DELETE ON subscriptions
WHEN OLD.pricing = 'bid'
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
