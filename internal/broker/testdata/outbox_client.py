"""A tiny outbox-listener-style client on aio-pika, for the outbox preset's test.

It declares its delay queue exactly as the outbox listener does, publishes a
retry to it by name, waits for the message to come back to the work queue,
prints how long that took, and rejects it without requeue, as the listener
gives up on a message. Usage: outbox_client.py AMQP_URL QUEUE DELAY_SECONDS
"""
import asyncio
import sys
import time

import aio_pika


async def main(url, queue, delay):
    conn = await aio_pika.connect_robust(url)
    async with conn:
        ch = await conn.channel(publisher_confirms=True)
        await ch.declare_queue(
            f"{queue}.delay_{delay}s",
            durable=True,
            arguments={
                "x-message-ttl": delay * 1000,
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": queue,
                "x-queue-type": "quorum",
            },
        )
        work = await ch.get_queue(queue, ensure=True)
        sent = time.monotonic()
        await ch.default_exchange.publish(
            aio_pika.Message(b"outbox", delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
            routing_key=f"{queue}.delay_{delay}s",
        )
        async with work.iterator() as it:
            async for msg in it:
                print(f"returned after {time.monotonic() - sent:.3f}s")
                await msg.reject(requeue=False)
                break


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
